"""REST API of registered models (routes in judging/api_urls.py): researchers list them and
register new ones, as on the Runs page (judging/model_services.py decides; refused input is
a 400 ``{field: [message]}``)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import StrictJSONParser
from core.permissions import IsResearcher
from core.serializer_fields import StrictCharField
from judging.model_selectors import language_model_list, language_model_served_at
from judging.model_services import language_model_create
from judging.models import LanguageModel, PromptStyle


class LanguageModelSerializer(serializers.ModelSerializer):
    served_by = serializers.SerializerMethodField(help_text="The endpoint record or role whose endpoint it uses.")
    n_runs = serializers.IntegerField(read_only=True, help_text="Generation runs with this model.")

    class Meta:
        model = LanguageModel
        fields = [
            "id",
            "name",
            "model",
            "role",
            "base_url",
            "api_key_env",
            "served_by",
            "prompt_style",
            "reasoning",
            "max_tokens",
            "n_runs",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.STR)
    def get_served_by(self, model: LanguageModel) -> str:
        return language_model_served_at(model)


class LanguageModelRegisterSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200, help_text="Unique; shown on the leaderboard.")
    endpoint = StrictCharField(
        max_length=2000,
        required=False,
        default="role:generate",
        help_text="role:<LLM role> (its endpoint when a run starts) or record:<endpoint record id>.",
    )
    model = StrictCharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="Model id at the endpoint; empty: the endpoint's own model.",
    )
    prompt_style = serializers.ChoiceField(choices=PromptStyle.choices, required=False, default=PromptStyle.INST)
    reasoning = serializers.BooleanField(
        required=False, default=False, help_text="Reasoning endpoint: T = 0.6; otherwise greedy (App. D.1)."
    )
    max_tokens = serializers.IntegerField(required=False, default=1024, min_value=1, max_value=1_000_000)


class LanguageModelListView(generics.ListAPIView):
    """Paginated like every list of the API (50 per page: count, next, previous, results)."""

    permission_classes = [IsResearcher]
    # A JSON body only: a form cannot tell reasoning's false from the text "0".
    parser_classes = [StrictJSONParser]
    serializer_class = LanguageModelSerializer

    def get_queryset(self):
        return language_model_list()

    @extend_schema(summary="Registered models for generation runs (by name)")
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    @extend_schema(
        summary="Register a model",
        request=LanguageModelRegisterSerializer,
        responses={
            201: LanguageModelSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="{field: [message]}; nothing stored"),
        },
        examples=[
            OpenApiExample(
                "An instruct model on the generate role",
                request_only=True,
                value={
                    "name": "qwen3-8b-instruct",
                    "endpoint": "role:generate",
                    "model": "Qwen/Qwen3-8B",
                    "prompt_style": "inst",
                    "reasoning": False,
                    "max_tokens": 1024,
                },
            )
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = LanguageModelRegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        model = language_model_create(**serializer.validated_data)  # ModelFieldError: a 400 naming the field
        return Response(
            LanguageModelSerializer(get_object_or_404(language_model_list(), pk=model.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class LanguageModelDetailView(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(summary="One registered model", responses={200: LanguageModelSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(LanguageModelSerializer(get_object_or_404(language_model_list(), pk=pk)).data)
