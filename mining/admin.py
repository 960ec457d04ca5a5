from django.contrib import admin

from mining.models import Corpus, CorpusImport, Document, Procedure, SplitReport, Topic


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "position")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(Procedure)
class ProcedureAdmin(admin.ModelAdmin):
    list_display = ("id", "goal", "topic", "split", "source_example_id", "created_at")
    list_filter = ("split", "topic")
    search_fields = ("goal", "source_example_id")
    readonly_fields = ("identity", "created_at", "updated_at")


@admin.register(Corpus)
class CorpusAdmin(admin.ModelAdmin):
    list_display = ("name", "n_documents", "created_at")
    search_fields = ("name",)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("id", "corpus", "doc_id", "topic", "created_at")
    list_filter = ("corpus", "topic")
    search_fields = ("doc_id", "url")
    readonly_fields = ("text_hash", "created_at")
    raw_id_fields = ("corpus",)


@admin.register(CorpusImport)
class CorpusImportAdmin(admin.ModelAdmin):
    list_display = ("id", "corpus_name", "original_name", "status", "created_by", "created_at")
    list_filter = ("status",)


@admin.register(SplitReport)
class SplitReportAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "embedding_model", "per_topic", "seed", "tau", "n_bench", "n_train")
