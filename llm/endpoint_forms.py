"""Forms of the endpoint-record pages. They collect text only: the services
(llm/endpoint_services.py) decide, and their errors are shown under the field they name."""

from __future__ import annotations

from typing import Any

from django import forms

from llm.endpoint_services import MAX_API_KEY_LENGTH, EndpointFieldError, endpoint_fields_clean
from llm.models import EndpointRecord

# What a browser may send at most per field (the services give the exact limits and messages).
_LONG = 2000


class EndpointRecordForm(forms.Form):
    name = forms.CharField(max_length=_LONG, help_text="How pages and runs call it, e.g. vllm-gpu-1.")
    base_url = forms.CharField(
        max_length=_LONG, label="Base URL", help_text="e.g. http://gpu-1:8000/v1 or https://api.openai.com/v1"
    )
    model = forms.CharField(
        max_length=_LONG, help_text="The model id the endpoint serves, e.g. how2everything/how2judge."
    )
    api_key = forms.CharField(
        max_length=MAX_API_KEY_LENGTH + 100,
        required=False,
        label="API key (stored encrypted)",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Never shown again after saving. Leave empty to keep the stored key.",
    )
    api_key_env = forms.CharField(
        max_length=_LONG,
        required=False,
        label="…or the environment variable holding the key",
        help_text="e.g. OPENAI_API_KEY; read when a request is sent.",
    )
    remove_stored_key = forms.BooleanField(required=False, label="Remove the stored key")
    max_concurrency = forms.CharField(
        max_length=_LONG, required=False, help_text="Requests in flight at once; empty: LLM_MAX_CONCURRENCY."
    )
    requests_per_minute = forms.CharField(max_length=_LONG, required=False, help_text="Empty: LLM_REQUESTS_PER_MINUTE.")
    tokens_per_minute = forms.CharField(max_length=_LONG, required=False, help_text="Empty: LLM_TOKENS_PER_MINUTE.")
    price_input = forms.CharField(
        max_length=_LONG,
        required=False,
        label="Price, input (USD / 1M tokens)",
        help_text="Empty: the price table (config/llm_prices.json).",
    )
    price_output = forms.CharField(max_length=_LONG, required=False, label="Price, output (USD / 1M tokens)")
    context_length = forms.CharField(
        max_length=_LONG,
        required=False,
        label="Context length (tokens)",
        help_text="Empty: what the server's /models says (vLLM), else what its errors say.",
    )
    timeout_seconds = forms.CharField(
        max_length=_LONG,
        required=False,
        label="Timeout per request (seconds)",
        help_text="Empty: LLM_TIMEOUT_SECONDS, raised for a slow endpoint from its observed speed.",
    )
    disable_thinking = forms.BooleanField(
        required=False,
        label="Run non-thinking",
        help_text='A hybrid reasoning model (Qwen3, How2Judge): sends chat_template_kwargs {"enable_thinking": false}.',
    )

    def __init__(self, *args, record: EndpointRecord | None = None, **kwargs):
        self.record = record
        if record is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                name: getattr(record, name)
                for name in (
                    "name",
                    "base_url",
                    "model",
                    "api_key_env",
                    "max_concurrency",
                    "requests_per_minute",
                    "tokens_per_minute",
                    "price_input",
                    "price_output",
                    "context_length",
                    "timeout_seconds",
                    "disable_thinking",
                )
            }
        super().__init__(*args, **kwargs)
        if record is None or not record.api_key_encrypted:
            del self.fields["remove_stored_key"]
        else:
            self.fields[
                "api_key"
            ].help_text = f"A key is {record.api_key_label}. Type a new one to replace it; leave empty to keep it."

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        try:
            endpoint_fields_clean(data, record=self.record)
        except EndpointFieldError as exc:
            for field, message in exc.errors.items():
                self.add_error(field if field in self.fields else None, message)
        return data
