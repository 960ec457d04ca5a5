"""REST API of endpoint records (routes in llm/api_urls.py): researchers read them (never a
key), admins add, change, test, retire/unretire them and assign them to roles. Every write
calls the service the pages call; refused input is a 400 ``{field: [message]}``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.shortcuts import get_object_or_404
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import StrictJSONParser
from core.permissions import IsAdminRole, IsResearcher
from core.serializer_fields import StrictCharField
from llm.endpoint_selectors import capabilities_view, endpoint_record_list, role_endpoint_rows
from llm.endpoint_services import (
    MAX_API_KEY_LENGTH,
    endpoint_record_create,
    endpoint_record_retire,
    endpoint_record_test,
    endpoint_record_unretire,
    endpoint_record_update,
    endpoint_role_assign,
)
from llm.models import EndpointRecord

_WRITE_FIELDS = (
    "name",
    "base_url",
    "model",
    "api_key",
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


class EndpointRecordSerializer(serializers.ModelSerializer):
    """An endpoint record as everyone with the researcher role sees it: the key is described
    (``api_key``: "saved, ending in …abcd", "from $OPENAI_API_KEY" or "no key"), never given."""

    api_key = serializers.CharField(
        source="api_key_label",
        read_only=True,
        help_text='How the key is kept: "saved, ending in …abcd", "from $VAR" or "no key".',
    )
    api_key_kind = serializers.CharField(read_only=True, help_text="stored, env or none")
    roles = serializers.SerializerMethodField(help_text="The roles assigned to this record.")
    capabilities = serializers.SerializerMethodField(
        help_text="What the product has learned of the endpoint (llm/capabilities.py): the structured-output "
        "path it uses, the paths the server rejected with its words, the context length and where it came from."
    )

    class Meta:
        model = EndpointRecord
        fields = [
            "id",
            "name",
            "base_url",
            "model",
            "api_key",
            "api_key_kind",
            "api_key_env",
            "max_concurrency",
            "requests_per_minute",
            "tokens_per_minute",
            "price_input",
            "price_output",
            "context_length",
            "timeout_seconds",
            "disable_thinking",
            "capabilities",
            "source",
            "retired",
            "retired_at",
            "roles",
            "last_test_at",
            "last_test_ok",
            "last_test_latency_ms",
            "last_test_message",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_roles(self, record: EndpointRecord) -> list[str]:
        return [a.role for a in record.assignments.all()]

    @extend_schema_field(serializers.DictField())
    def get_capabilities(self, record: EndpointRecord) -> dict[str, Any]:
        return capabilities_view(record)


def _text(help_text: str, max_length: int = 2000) -> serializers.CharField:
    return serializers.CharField(
        required=False, allow_blank=True, allow_null=True, max_length=max_length, help_text=help_text
    )


class EndpointRecordWriteSerializer(serializers.Serializer):
    """What an admin sends to add (name, base_url and model required) or change a record
    (only the fields sent change). Limits: whole numbers ≥ 1, or null for the LLM_* default;
    prices: USD per million tokens, or null for the price table."""

    # A record always has these three: a change may give a new value, never an empty one.
    name = StrictCharField(required=False, max_length=100, help_text="Unique name, e.g. vllm-gpu-1.")
    base_url = StrictCharField(
        required=False,
        max_length=500,
        validators=[RegexValidator(r"^https?://[^/?#\s]", message="must start with http:// or https:// and a host")],
        help_text="http:// or https:// base URL of an OpenAI-compatible API, e.g. http://gpu-1:8000/v1.",
    )
    model = StrictCharField(required=False, max_length=200, help_text="Model id at the endpoint.")
    api_key = StrictCharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        write_only=True,
        max_length=MAX_API_KEY_LENGTH,
        help_text="A key to store encrypted; never returned. Empty: keep the stored key.",
    )
    api_key_env = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=100,
        validators=[
            RegexValidator(
                r"^[A-Za-z_][A-Za-z0-9_]*$",
                message="must be an environment variable name: letters, digits and _, not starting with a digit",
            )
        ],
        help_text="Or the environment variable holding the key (replaces a stored key); names on the allow-list only.",
    )
    remove_stored_key = serializers.BooleanField(required=False, default=False, help_text="Forget the stored key.")
    max_concurrency = _text("Requests in flight at once (≥ 1), or null.", 30)
    requests_per_minute = _text("Requests per minute (≥ 1), or null.", 30)
    tokens_per_minute = _text("Tokens per minute (≥ 1), or null.", 30)
    price_input = _text("USD per million input tokens, or null.", 30)
    price_output = _text("USD per million output tokens, or null.", 30)
    context_length = _text("The model's context in tokens (≥ 1), or null to learn it from the server.", 30)
    timeout_seconds = _text("Seconds one request may take (≥ 1), or null for LLM_TIMEOUT_SECONDS.", 30)
    disable_thinking = serializers.BooleanField(
        required=False, help_text='Send chat_template_kwargs {"enable_thinking": false} (Qwen3, How2Judge).'
    )


class EndpointRecordCreateSerializer(EndpointRecordWriteSerializer):
    """A new record: name, base_url and model are required."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("name", "base_url", "model"):
            self.fields[name].required = True


class RoleAssignmentSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=(), help_text="One of the LLM roles (generate, how2score_judge, ...).")
    record = serializers.IntegerField(
        allow_null=True,
        min_value=1,
        max_value=2**31 - 1,
        help_text="The endpoint record's id; null: the role uses its environment variables.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        role = self.fields["role"]
        assert isinstance(role, serializers.ChoiceField)
        role.choices = list(settings.LLM_ROLES)  # the roles of this configuration


class RoleRowSerializer(serializers.Serializer):
    role = serializers.CharField()
    record = serializers.SerializerMethodField(help_text="The assigned record's id, or null (environment variables).")
    # DRF's serializer metaclass takes declared fields out of the class; the stubs see this
    # one as overriding Field.source.
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="The record's name, or which environment variables feed the role."
    )
    base_url = serializers.CharField()
    model = serializers.CharField()
    api_key = serializers.CharField(help_text="How the key is kept, never the key.")
    env_differs = serializers.CharField(help_text="Set when the environment names another endpoint than the record.")

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_record(self, row: dict) -> int | None:
        return row["record"].pk if row["record"] is not None else None


@sensitive_variables("data", "sent")
def _data(serializer: EndpointRecordWriteSerializer, *, partial_from: EndpointRecord | None) -> dict[str, Any]:
    sent = serializer.validated_data
    data = {name: sent.get(name) for name in _WRITE_FIELDS if name in sent}
    if partial_from is not None:  # fields not sent keep their values
        for name in _WRITE_FIELDS:
            if name not in data and name not in ("api_key", "api_key_env"):
                data[name] = getattr(partial_from, name)
        if "api_key_env" not in sent:  # a new key replaces the variable; otherwise the key stays as it is
            data["api_key_env"] = (
                "" if sent.get("api_key") or partial_from.api_key_encrypted else partial_from.api_key_env
            )
    return data


_ERRORS = {
    400: OpenApiResponse(OpenApiTypes.OBJECT, description="Refused input: {field: [message]}; nothing was stored"),
    401: OpenApiResponse(description="Not logged in (no token or session)"),
    403: OpenApiResponse(description="The admin role is needed"),
}


class _Roles(APIView):
    # A JSON body only: a form cannot send null (a record's "null for the default"), nor tell
    # a number from its text.
    parser_classes = [StrictJSONParser]

    def get_permissions(self):
        return [IsResearcher()] if self.request.method in ("GET", "HEAD", "OPTIONS") else [IsAdminRole()]


class EndpointRecordListView(_Roles, generics.ListAPIView):
    """Paginated like every list of the API (50 per page: count, next, previous, results)."""

    serializer_class = EndpointRecordSerializer

    def get_queryset(self):
        return endpoint_record_list().order_by("retired", "name", "pk")

    @extend_schema(summary="List endpoint records (in use first, by name)")
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    @extend_schema(
        summary="Add an endpoint record (admin)",
        request=EndpointRecordCreateSerializer,
        responses={201: EndpointRecordSerializer, **_ERRORS},
        examples=[
            OpenApiExample(
                "vLLM on a GPU machine",
                request_only=True,
                value={
                    "name": "vllm-gpu-1",
                    "base_url": "http://gpu-1:8000/v1",
                    "model": "how2everything/how2judge",
                    "api_key_env": "VLLM_API_KEY",
                    "max_concurrency": 32,
                },
            )
        ],
    )
    @sensitive_variables("data", "sent")
    def post(self, request: Request) -> Response:
        serializer = EndpointRecordCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # A refusal (EndpointFieldError) is the exception handler's 400 naming the fields.
        record = endpoint_record_create(
            source=f"added through the API by {request.user.get_username()}", **_data(serializer, partial_from=None)
        )
        return Response(EndpointRecordSerializer(record).data, status=status.HTTP_201_CREATED)


class EndpointRecordDetailView(_Roles, APIView):
    @extend_schema(summary="One endpoint record", responses={200: EndpointRecordSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(EndpointRecordSerializer(get_object_or_404(endpoint_record_list(), pk=pk)).data)

    @extend_schema(
        summary="Change an endpoint record (admin): only the fields sent change",
        request=EndpointRecordWriteSerializer,
        responses={200: EndpointRecordSerializer, **_ERRORS},
    )
    @sensitive_variables("data", "sent")
    def patch(self, request: Request, pk: int) -> Response:
        record = get_object_or_404(EndpointRecord, pk=pk)
        serializer = EndpointRecordWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        record = endpoint_record_update(
            record=record,
            remove_stored_key=serializer.validated_data["remove_stored_key"],
            **_data(serializer, partial_from=record),
        )
        return Response(EndpointRecordSerializer(get_object_or_404(endpoint_record_list(), pk=record.pk)).data)


class EndpointRecordTestView(APIView):
    permission_classes = [IsAdminRole]
    parser_classes = [StrictJSONParser]

    @extend_schema(
        summary="Test an endpoint record (admin): send the llm_check request and store the result",
        request=None,
        responses={200: EndpointRecordSerializer, **_ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        record = endpoint_record_test(record=get_object_or_404(EndpointRecord, pk=pk))
        return Response(EndpointRecordSerializer(get_object_or_404(endpoint_record_list(), pk=record.pk)).data)


class EndpointRecordRetireView(APIView):
    permission_classes = [IsAdminRole]
    parser_classes = [StrictJSONParser]
    retire = True

    @extend_schema(
        summary="Retire (or unretire) an endpoint record (admin); records are never deleted",
        request=None,
        responses={200: EndpointRecordSerializer, **_ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        record = get_object_or_404(EndpointRecord, pk=pk)
        if self.retire:
            endpoint_record_retire(record=record)
        else:
            endpoint_record_unretire(record=record)
        return Response(EndpointRecordSerializer(get_object_or_404(endpoint_record_list(), pk=record.pk)).data)


class EndpointRecordUnretireView(EndpointRecordRetireView):
    retire = False


class RoleAssignmentView(_Roles, APIView):
    @extend_schema(summary="Where each LLM role's endpoint comes from", responses={200: RoleRowSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(RoleRowSerializer(role_endpoint_rows(), many=True).data)

    @extend_schema(
        summary="Assign an endpoint record to a role (admin); the next run uses it",
        request=RoleAssignmentSerializer,
        responses={200: RoleRowSerializer(many=True), **_ERRORS},
        examples=[
            OpenApiExample(
                "Judge on the GPU machine", request_only=True, value={"role": "how2score_judge", "record": 3}
            )
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = RoleAssignmentSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        record_id = serializer.validated_data["record"]
        record = None
        if record_id is not None:
            record = EndpointRecord.objects.filter(pk=record_id).first()
            if record is None:
                return Response({"record": ["no such endpoint record"]}, status=status.HTTP_400_BAD_REQUEST)
        endpoint_role_assign(role=serializer.validated_data["role"], record=record)
        return Response(RoleRowSerializer(role_endpoint_rows(), many=True).data)
