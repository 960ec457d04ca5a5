"""REST API of rubrics (docs/api.md, "Rubrics"): study kinds defined as data. ``GET`` lists the
stored rubrics, ``POST`` stores one (a JSON body that is the rubric, or a YAML or JSON ``file``
as multipart) and registers its kind ``rubric:<key>``, which ``POST /api/studies/`` then takes.
A bad rubric is a 400 naming each problem's path (``questions[2].scale.max``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.kinds.rubric.definition import kind_key
from annotate.kinds.rubric.schema import (
    FREE_TEXT_MAX_LENGTH,
    ID_PATTERN,
    KEY_PATTERN,
    MAX_INSTRUCTIONS_LENGTH,
    MAX_KEY_LENGTH,
    MAX_OPTION_LENGTH,
    MAX_OPTIONS,
    MAX_PROMPT_LENGTH,
    MAX_QUESTIONS,
    MAX_RUBRIC_KEY_LENGTH,
    MAX_SOURCE_BYTES,
    MAX_TITLE_LENGTH,
    QUESTION_TYPES,
)
from annotate.kinds.rubric.services import rubric_create, rubric_list
from annotate.models import Rubric
from annotate.studies.api_fields import error_responses
from core.app_errors import InvalidInput
from core.parsers import StrictJSONParser
from core.roles import is_researcher


class RubricSerializer(serializers.Serializer):
    key = serializers.CharField()
    kind = serializers.CharField(help_text="The study kind's key: rubric:<key>")
    title = serializers.CharField()
    definition = serializers.DictField(help_text="The checked rubric: key, title, instructions, questions")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


# A question as the request schema shows it (the rubric itself is checked by schema.py). Built
# from a mapping: a serializer cannot declare a field named "required" as a class attribute.
RubricQuestionIn = inline_serializer(
    "RubricQuestionIn",
    {
        "id": serializers.RegexField(f"^{ID_PATTERN.pattern}$", max_length=MAX_KEY_LENGTH),
        "type": serializers.ChoiceField(choices=QUESTION_TYPES),
        "prompt": serializers.CharField(max_length=MAX_PROMPT_LENGTH),
        "required": serializers.BooleanField(),
        "scale": serializers.DictField(required=False, help_text="likert: min, max (at most 11 points), labels"),
        "options": serializers.ListField(
            child=serializers.CharField(max_length=MAX_OPTION_LENGTH),
            required=False,
            min_length=2,
            max_length=MAX_OPTIONS,
            help_text="multiple_choice: the option texts",
        ),
        "max_length": serializers.IntegerField(
            required=False, min_value=1, max_value=FREE_TEXT_MAX_LENGTH, help_text="free_text: the longest answer"
        ),
    },
)


class RubricIn(serializers.Serializer):
    key = serializers.RegexField(f"^{KEY_PATTERN.pattern}$", max_length=MAX_RUBRIC_KEY_LENGTH)
    title = serializers.CharField(max_length=MAX_TITLE_LENGTH)
    instructions = serializers.CharField(max_length=MAX_INSTRUCTIONS_LENGTH)
    questions = serializers.ListField(child=RubricQuestionIn, min_length=1, max_length=MAX_QUESTIONS)


EXAMPLE = {
    "key": "clarity",
    "title": "Clarity and safety",
    "instructions": "Read the goal and the steps, then answer every question.",
    "questions": [
        {
            "id": "clear",
            "type": "likert",
            "prompt": "How clear are the steps?",
            "required": True,
            "scale": {"min": 1, "max": 5, "labels": {"1": "unusable", "5": "perfectly clear"}},
        },
        {"id": "safe", "type": "yes_no", "prompt": "Is it safe to follow?", "required": True},
    ],
}


def rubric_data(row: Rubric) -> dict[str, Any]:
    return {
        "key": row.key,
        "kind": kind_key(row.key),
        "title": row.title,
        "definition": row.definition,
        "created_by": row.created_by.get_username() if row.created_by else None,
        "created_at": row.created_at.isoformat(),
    }


class RubricListCreateView(APIView):
    parser_classes = [StrictJSONParser, MultiPartParser, FormParser]
    upload_check = staticmethod(is_researcher)  # a rubric file (at most MAX_SOURCE_BYTES are read)

    @extend_schema(
        summary="List rubrics",
        description="The stored rubrics (study kinds defined as data), by key, each with its kind's key.",
        responses={200: RubricSerializer(many=True), **error_responses()},
    )
    def get(self, request):
        return Response([rubric_data(row) for row in rubric_list()])

    @extend_schema(
        summary="Create a rubric",
        description=(
            "Store a rubric and register its study kind rubric:<key>: a JSON body that is the rubric, or "
            "multipart with `file`, a YAML or JSON file (read with a safe loader; at most "
            f"{MAX_SOURCE_BYTES} bytes). A rubric has key, title, instructions and at most 30 questions, each "
            "with id, type (yes_no, likert, multiple_choice, free_text, step_links), prompt and required, "
            "scale {min, max, labels} for likert and options for multiple_choice. A bad rubric is refused "
            "with each problem under its path (e.g. `questions[2].scale.max`); a key already stored under `key`."
        ),
        request={
            "application/json": RubricIn,
            "multipart/form-data": inline_serializer("RubricFile", {"file": serializers.FileField()}),
        },
        examples=[OpenApiExample("A rubric", value=EXAMPLE, request_only=True)],
        responses={
            201: RubricSerializer,
            **error_responses(_400="{<path>: [problem]}: each problem of the rubric under its path, or key taken"),
        },
    )
    def post(self, request):
        upload = request.FILES.get("file") if hasattr(request, "FILES") else None
        if upload is not None:
            source: Any = upload.read(MAX_SOURCE_BYTES + 1)
            name = upload.name or ""
        elif (
            isinstance(request.data, dict)
            and "file" not in request.data
            and request.content_type.startswith("application/json")
        ):
            source, name = dict(request.data), ""
        else:
            raise InvalidInput(fields={"file": "send the rubric as a JSON body or a YAML or JSON file named file"})
        row = rubric_create(source=source, name=name, created_by=request.user)
        return Response(rubric_data(row), status=status.HTTP_201_CREATED)
