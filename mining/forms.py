from typing import Any

from django import forms

from core.record_files import RecordError, file_kind


class CorpusUploadForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="A new corpus, or an existing one to add documents to.")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    file = forms.FileField(help_text="JSONL, CSV, Parquet or Arrow/Feather, plain or .gz/.zst/.bz2/.xz")
    id_field = forms.CharField(initial="id", max_length=200)
    text_field = forms.CharField(initial="text", max_length=200)
    url_field = forms.CharField(initial="url", max_length=200)
    topic_field = forms.CharField(initial="topic", max_length=200)
    skip_bad = forms.BooleanField(required=False, label="Skip bad rows (import the good ones and list the bad)")
    create_topics = forms.BooleanField(required=False, label="Create topics that do not exist yet")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        try:
            file_kind(upload.name)
        except RecordError as exc:
            raise forms.ValidationError(exc.message) from exc
        return upload


class MiningRunForm(forms.Form):
    """Launch a run (or change an existing run's stages) from its YAML configuration."""

    corpus: "forms.ModelChoiceField[Any]" = forms.ModelChoiceField(queryset=None, empty_label=None)
    config = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 22, "cols": 90, "spellcheck": "false"}),
        help_text="YAML: name, topics, candidates_per_topic, … (see docs/mining.md).",
    )

    def __init__(self, *args, **kwargs):
        from mining.models import Corpus

        super().__init__(*args, **kwargs)
        corpus = self.fields["corpus"]
        if isinstance(corpus, forms.ModelChoiceField):
            corpus.queryset = Corpus.objects.order_by("name")


DEFAULT_RUN_CONFIG = """\
name: my-run
topics: all                 # or a list of topic names or slugs
candidates_per_topic: 100   # most documents sampled per topic
# desired_valid_per_topic: 20   # stop a topic early once it has this many procedures
# extract_batch_size: 20        # documents sampled per topic at a time (needed with the line above)
seed: 0
min_steps: 5
max_steps: 15
executor: online            # or batch (OpenAI Batch API)
concurrency: 16
workers: 1
# budget_usd: 10
failure_retries: 1
# stages:
#   extract_procedure: {prompt_file: extract_procedure.txt, model: gpt-4.1, temperature: 0}
"""
