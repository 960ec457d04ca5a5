"""Launching a run through the API from its YAML configuration: the request (``RunLaunchSerializer`` with its ``ConfigField``, JSON or a multipart upload), the answer, the refusals that are a 400 naming the line and key (``LAUNCH_ERRORS``, ``launch_error_body``) and the OpenAPI description of the launch (``launch_schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

from core.api_schema import ApiErrorSerializer
from core.app_errors import InvalidInput
from core.run_configs import config_max_bytes
from core.run_launch import config_error_location
from llm.endpoints import EndpointNotConfigured

LAUNCH_SOURCE = "the configuration"


# What a launch service raises for a configuration it refuses: each is a 400 naming the line
# and field. InvalidInput covers RunConfigError, PromptError and an unknown LLM role; a role
# without an endpoint (503 elsewhere) is the configuration's fault here; the configuration
# parsers' plain ValueErrors are refusals too.
LAUNCH_ERRORS = (InvalidInput, EndpointNotConfigured, ValueError)


class ConfigField(serializers.Field):
    """The YAML text of a run configuration: a string (a JSON body, a form field) or an
    uploaded file under the same name; at most RUN_CONFIG_MAX_BYTES, UTF-8."""

    default_error_messages = {
        "type": "give the YAML text of the run's configuration, or upload it as a file",
        "size": "larger than {limit:,} bytes (RUN_CONFIG_MAX_BYTES)",
        "encoding": "not UTF-8 text",
        "empty": "the configuration is empty",
    }

    def to_internal_value(self, data) -> dict[str, str]:
        limit = config_max_bytes()
        if isinstance(data, UploadedFile):
            raw = data.read(limit + 1)
            if len(raw) > limit:
                self.fail("size", limit=limit)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.fail("encoding")
            name = "".join(c for c in (data.name or "") if c.isprintable())[:100]
            source = f"{name or 'the uploaded file'}"
        elif isinstance(data, str):
            if len(data.encode("utf-8", "surrogatepass")) > limit:
                self.fail("size", limit=limit)
            text, source = data, LAUNCH_SOURCE
        else:
            self.fail("type")
        if not text.strip():
            self.fail("empty")
        return {"text": text, "source": source}

    def to_representation(self, value) -> str:
        return value["text"] if isinstance(value, dict) else str(value)


@extend_schema_field(
    {"type": "string", "minLength": 1, "description": "The run's YAML configuration (text, or a file upload)"}
)
class _DocumentedConfigField(ConfigField):
    pass


class RunLaunchSerializer(serializers.Serializer):
    """``config``: the YAML the command reads from a file (``--config FILE.yaml``), as text in
    a JSON body or as an uploaded file (multipart) under the same name."""

    config = _DocumentedConfigField(help_text="The run's YAML configuration: the same text the command takes as a file")


class RunLaunchResultSerializer(serializers.Serializer):
    runs = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "The runs started (usually one; a reference-shape bench configuration starts one per model), each as its "
            "detail gives it"
        ),
    )
    notes = serializers.ListField(
        child=serializers.CharField(), help_text=("What the launch said on the way (a reference configuration's notes)")
    )


class LaunchErrorSerializer(ApiErrorSerializer):
    config = serializers.ListField(child=serializers.CharField(), help_text="Why nothing was started")
    line = serializers.IntegerField(
        allow_null=True, required=False, help_text="The configuration's line the refusal is about, when known"
    )
    key = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="The configuration's key (dotted: stages.rewrite.temperature), when known",
    )


@dataclass
class Launched:
    """What a viewset's ``launch_runs`` started."""

    runs: list[Any]
    notes: list[str] = field(default_factory=list)


def launch_error_body(text: str, source: str, exc: BaseException) -> dict[str, Any]:
    """A refused launch as a 400 body (code ``config_invalid``): the message with its line under
    ``config``, and the line and the configuration's key it is about."""
    message = str(exc)
    if not message.startswith(source):
        message = f"{source}: {message}"
    where = config_error_location(text, message, source=source)
    refusal = InvalidInput(
        fields={"config": where["message"]}, code="config_invalid", extra={"line": where["line"], "key": where["field"]}
    )
    return refusal.body()


def launch_schema(
    *,
    kind: str,
    command: str,
    example: str,
    description: str = "",
    request: type[serializers.Serializer] = RunLaunchSerializer,
):
    """The OpenAPI description of POST on a collection of runs: a minimal YAML example."""
    return extend_schema(
        summary=f"Launch {kind}",
        description=(
            f"Start {kind} from a YAML configuration (admins), exactly as `{command}` does with a file: the "
            'same parsing, the same refusals, the same Celery task. Send `{"config": "<yaml>"}` as '
            "JSON, or upload the file as `config` (multipart). A refused configuration is a 400 naming the "
            "line and the key, and nothing is stored. " + description
        ),
        request={"application/json": request, "multipart/form-data": request},
        responses={
            201: RunLaunchResultSerializer,
            400: OpenApiResponse(LaunchErrorSerializer, description="The configuration was refused; nothing stored"),
            401: OpenApiResponse(ApiErrorSerializer, description="Not logged in (no token or session)"),
            403: OpenApiResponse(ApiErrorSerializer, description="The admin role is needed"),
        },
        examples=[OpenApiExample("Minimal configuration", value={"config": example}, request_only=True)],
        filters=False,
    )
