from django import forms

from mining.record_files import RecordFileError, file_kind


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
        except RecordFileError as exc:
            raise forms.ValidationError(exc.detail) from exc
        return upload
