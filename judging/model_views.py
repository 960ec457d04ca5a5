"""Registered models on the Runs pages: the list, and the "Register a model" form
(researchers; no detour through the Django admin)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.permissions import researcher_required
from judging.model_forms import LanguageModelRegisterForm
from judging.model_selectors import language_model_list, language_model_served_at
from judging.model_services import ModelFieldError, language_model_create


def language_model_rows() -> list:
    models = list(language_model_list())
    for model in models:
        model.served_at = language_model_served_at(model)  # type: ignore[attr-defined]  # shown in the table
    return models


@researcher_required
@require_http_methods(["GET", "POST"])
def language_models(request: HttpRequest) -> HttpResponse:
    form = LanguageModelRegisterForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            model = language_model_create(
                name=data["name"],
                endpoint=data["endpoint"],
                model=data["model"],
                prompt_style=data["prompt_style"],
                reasoning=data["reasoning"],
                max_tokens=data["max_tokens"],
            )
        except ModelFieldError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, f"Model {model.name!r} registered: start a generation run with it below.")
            return redirect("judging_runs")
    return render(
        request,
        "judging/language_models.html",
        {"form": form, "language_models": language_model_rows()},
        status=400 if form.errors else 200,
    )
