"""The researchers' rubric pages: the stored rubrics and "New rubric" (paste or upload YAML or
JSON; each problem is shown with its path and nothing is stored). Routed by the package's
urls.py, rendered from its templates/ folder."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotate.kinds.rubric.definition import kind_key
from annotate.kinds.rubric.schema import MAX_SOURCE_BYTES
from annotate.kinds.rubric.services import rubric_create, rubric_list
from core.app_errors import AppError
from core.permissions import researcher_required
from core.request_bodies import accepts_uploads
from core.roles import is_researcher


class RubricForm(forms.Form):
    text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}),
        max_length=MAX_SOURCE_BYTES,
        label="Rubric (YAML or JSON)",
        help_text='key, title, instructions and questions (docs/annotation.md, "Rubrics").',
    )
    file = forms.FileField(required=False, label="…or a YAML or JSON file")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("text", "").strip() and not data.get("file"):
            raise forms.ValidationError("Paste a rubric or choose a file.")
        return data


@accepts_uploads(is_researcher)
@researcher_required
@require_http_methods(["GET", "POST"])
def rubric_new(request: HttpRequest) -> HttpResponse:
    form = RubricForm(request.POST or None, request.FILES or None)
    problems: list[tuple[str, str]] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data.get("file")
        if upload is not None:
            source: str | bytes = upload.read(MAX_SOURCE_BYTES + 1)
            name = upload.name or ""
        else:
            source, name = form.cleaned_data["text"], ""
        try:
            row = rubric_create(source=source, name=name, created_by=request.user)
        except AppError as exc:
            problems = [(path, problem) for path, found in exc.fields.items() for problem in found]
            problems = problems or [("rubric", exc.message)]
        else:
            messages.success(request, f"Rubric {row.key} stored: new studies can be of the kind {row.title}.")
            return redirect("annotate:rubric_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "annotate/rubric_new.html", {"form": form, "problems": problems}, status=status)


@researcher_required
@require_http_methods(["GET"])
def rubric_index(request: HttpRequest) -> HttpResponse:
    rows = [(row, kind_key(row.key)) for row in rubric_list()]
    return render(request, "annotate/rubric_list.html", {"rows": rows})
