"""The "Register a model" form of the Runs page. It collects text; the service decides
(judging/model_services.py) and its errors appear under the field they name."""

from __future__ import annotations

from django import forms

from judging.model_services import ModelFieldError, endpoint_choices
from judging.models import PromptStyle


class LanguageModelRegisterForm(forms.Form):
    name = forms.CharField(max_length=2000, help_text="Shown on the leaderboard, e.g. qwen3-8b-instruct.")
    endpoint = forms.ChoiceField(
        choices=(),
        initial="role:generate",
        label="Served by",
        help_text="A role follows whatever endpoint the role has when a run starts; "
        "an endpoint record pins the model to that record's base URL and key.",
    )
    model = forms.CharField(
        max_length=2000,
        required=False,
        label="Model id",
        help_text="The id the endpoint knows it by; empty: the endpoint's own model.",
    )
    prompt_style = forms.ChoiceField(choices=PromptStyle.choices, initial=PromptStyle.INST)
    reasoning = forms.BooleanField(
        required=False,
        help_text="A reasoning (thinking) endpoint: sampled at temperature 0.6 "
        "(How2Everything App. D.1); otherwise greedy.",
    )
    max_tokens = forms.CharField(max_length=30, initial="1024")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        endpoint = self.fields["endpoint"]
        if isinstance(endpoint, forms.ChoiceField):
            endpoint.choices = endpoint_choices()

    def add_service_errors(self, exc: ModelFieldError) -> None:
        for field, message in exc.errors.items():
            self.add_error(field if field in self.fields else None, message)
