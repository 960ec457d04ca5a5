"""Serializers of creating a study through the API: the creation input (mapped to the options every
creation path passes to ``study_create_from_sources``), the import a worker runs, and the
schema's examples."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema_field
from rest_framework import serializers

from annotate import constants as C
from annotate.kinds import DEFAULT_KIND_KEY, kind_choices, kind_choices_fresh
from annotate.models import StudyImport
from annotate.participation.allocation import POLICY_FIXED, POLICY_LABELS
from annotate.studies.api_fields import (
    INSTRUCTIONS_MAX_CHARS,
    INT_MAX,
    MAX_SAMPLE,
    SEED_MAX,
    SMALL_INT_MAX,
    Flag,
    Pattern,
    Text,
)
from core.serializer_fields import (
    FormNullDecimalField,
    FormNullIntegerField,
    StrictBooleanField,
    StrictFloatField,
    StrictIntegerField,
)

if TYPE_CHECKING:
    pass
from annotate.studies.forms import QUALIFICATION_AUTO
from annotate.studies.imports import study_create_options
from annotate.studies.item_sources import judge_names
from judging.models import JudgeRun, Judgment
from mining.models import Topic


class StudyCreateSerializer(serializers.Serializer):
    """A new study: items from an uploaded file (multipart), a sample of judged generations, or
    both, with the New study page's settings (each absent one: the page's default)."""

    name = Text(max_length=200)
    kind = serializers.ChoiceField(choices=kind_choices(), default=DEFAULT_KIND_KEY)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The registry is asked per request: a kind registered after start-up is a valid kind.
        kind_field = self.fields["kind"]
        assert isinstance(kind_field, serializers.ChoiceField)
        kind_field.choices = kind_choices_fresh()

    items_file = serializers.FileField(
        required=False,
        help_text="multipart only: JSONL (optionally .gz/.zst/.bz2/.xz), one item per line in the "
        "shape of the kind (docs/annotation.md); the page's limits apply",
    )
    judge = Text(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Also sample judged generations of this judge (as create_study --from-judge)",
    )
    n_judged = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_SAMPLE,
        help_text="How many judged generations (stratified by topic and label)",
    )
    seed = StrictIntegerField(required=False, default=0, min_value=0, max_value=SEED_MAX)
    judge_runs = serializers.ListField(
        child=StrictIntegerField(min_value=1, max_value=INT_MAX),
        required=False,
        max_length=100,
        help_text="Only judgments of these judge runs (ids, as /api/judging/judge-runs/ lists them); judge defaults "
        "to theirs",
    )
    topics = serializers.ListField(
        child=Text(max_length=100), required=False, max_length=100, help_text="Only procedures of these topics (slugs)"
    )
    models = serializers.ListField(
        child=Text(max_length=200), required=False, max_length=100, help_text="Only generations of these models"
    )
    slug = Pattern(
        r"^[a-z0-9-]{1,100}$",
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Lowercase letters, digits and '-'; empty: made from the name",
    )
    instructions = Text(
        required=False,
        allow_blank=True,
        max_length=INSTRUCTIONS_MAX_CHARS,
        trim_whitespace=False,
        help_text="Empty: the kind's default guidelines",
    )
    annotators_per_item = StrictIntegerField(
        required=False, default=C.ANNOTATORS_PER_ITEM_DEFAULT, min_value=1, max_value=100
    )
    min_seconds = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=INT_MAX, help_text="Empty: the kind's default"
    )
    lease_minutes = StrictIntegerField(required=False, default=C.LEASE_MINUTES_DEFAULT, min_value=1, max_value=INT_MAX)
    training_enabled = Flag(required=False, default=True)
    qualification_enabled = serializers.ChoiceField(
        choices=[(QUALIFICATION_AUTO, "when the items include gold qualification items"), ("on", "on"), ("off", "off")],
        required=False,
        default=QUALIFICATION_AUTO,
    )
    qualification_pass = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=SMALL_INT_MAX,
        help_text="Gold items needed to pass; empty: 80 % of them",
    )
    attention_check_rate = StrictFloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=0.99,
        help_text="Empty: the default when the items include checks, else 0",
    )
    attention_max_failures = StrictIntegerField(
        required=False, default=C.ATTENTION_MAX_FAILURES_DEFAULT, min_value=0, max_value=SMALL_INT_MAX
    )
    max_items_per_annotator = FormNullIntegerField(required=False, allow_null=True, min_value=1, max_value=INT_MAX)
    items_per_page = StrictIntegerField(required=False, default=1, min_value=1, max_value=C.MAX_ITEMS_PER_PAGE)
    completion_code = Text(required=False, allow_blank=True, max_length=64)
    screened_out_code = Text(required=False, allow_blank=True, max_length=64)
    payment_per_item = FormNullDecimalField(
        required=False, allow_null=True, max_digits=8, decimal_places=2, min_value=Decimal(0), help_text="USD per item"
    )
    min_annotations_for_majority = StrictIntegerField(
        required=False,
        default=C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
        min_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN,
        max_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX,
    )
    prolific_study_id = Pattern(
        C.PROLIFIC_STUDY_ID_PATTERN, required=False, allow_blank=True, max_length=100, default=""
    )
    allow_other_pids = Flag(required=False, default=False)
    allocation_policy = serializers.ChoiceField(
        choices=list(POLICY_LABELS.items()),
        required=False,
        default=POLICY_FIXED,
        help_text="fixed (k per item), dynamic (k, then more while undecided) or active (dynamic k, new items "
        "where they narrow the PPI++ How2Score interval most)",
    )
    max_annotators_per_item = FormNullIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=100,
        help_text="Dynamic k's most annotators per item; empty: annotators_per_item + 1",
    )
    target_interval_width = StrictFloatField(
        required=False,
        allow_null=True,
        min_value=0.001,
        max_value=0.999,
        help_text="Stop at this PPI++ How2Score interval width (on 0-1: 0.10 = 10 points)",
    )

    def validate_judge(self, value: str) -> str:
        if value and value not in judge_names():
            raise serializers.ValidationError(f"no judged generations by a judge named {value!r}")
        return value

    def _check_selection(self, attrs: dict[str, Any]) -> None:
        """The judge runs, topics and models must exist and belong to the judge's judgments."""
        runs = attrs.get("judge_runs") or []
        if runs:
            found = dict(JudgeRun.objects.filter(pk__in=runs).values_list("pk", "judge"))
            if missing := [r for r in runs if r not in found]:
                raise serializers.ValidationError({"judge_runs": [f"no judge run with id {missing[0]}"]})
            judges = set(found.values())
            if len(judges) > 1:
                raise serializers.ValidationError(
                    {
                        "judge_runs": [
                            f"the runs are of different judges ({', '.join(sorted(judges))}); a study samples one judge"
                        ]
                    }
                )
            run_judge = judges.pop()
            if attrs.get("judge") and attrs["judge"] != run_judge:
                raise serializers.ValidationError(
                    {"judge_runs": [f"these runs are of judge {run_judge!r}, not {attrs['judge']!r}"]}
                )
            attrs["judge"] = run_judge
        if (attrs.get("topics") or attrs.get("models")) and not attrs.get("judge"):
            field = "topics" if attrs.get("topics") else "models"
            raise serializers.ValidationError(
                {field: ["a selection of judged generations needs a judge or judge runs"]}
            )
        if topics := attrs.get("topics"):
            known = set(Topic.objects.filter(slug__in=topics).values_list("slug", flat=True))
            if missing := [t for t in topics if t not in known]:
                raise serializers.ValidationError({"topics": [f"no topic with slug {missing[0]!r}"]})
        if models := attrs.get("models"):
            known = set(
                Judgment.objects.filter(judge=attrs["judge"], generation__model__in=models)
                .values_list("generation__model", flat=True)
                .distinct()
            )
            if missing := [m for m in models if m not in known]:
                raise serializers.ValidationError(
                    {"models": [f"judge {attrs['judge']!r} has judged no generation of a model named {missing[0]!r}"]}
                )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self._check_selection(attrs)
        if not attrs.get("items_file") and not attrs.get("judge"):
            raise serializers.ValidationError(
                {"items_file": ["upload an items file (multipart), name a judge to sample judged generations, or both"]}
            )
        if attrs.get("judge") and not attrs.get("n_judged"):
            raise serializers.ValidationError({"n_judged": ["say how many judged generations to sample"]})
        return attrs

    def options(self) -> dict[str, Any]:
        """The page's ``options`` for ``study_create_from_sources`` / ``study_import_queue``."""
        data = self.validated_data
        qualification = {QUALIFICATION_AUTO: None, "on": True}.get(data["qualification_enabled"], False)
        return study_create_options({**data, "qualification_enabled": qualification})


# A true/false setting in a form: one enum of the schema, FormFlagEnum (config/django/base.py).
FORM_FLAG_CHOICES = ["true", "false"]


class StudyCreateFormSerializer(StudyCreateSerializer):
    """The schema of the same fields sent as a form (multipart/form-data), which carries text
    only: a true/false setting is the word true or false there (Flag reads those), so the form's
    schema says so; the view reads the form with StudyCreateSerializer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, field in list(self.fields.items()):
            if isinstance(field, StrictBooleanField):
                self.fields[name] = serializers.ChoiceField(
                    choices=FORM_FLAG_CHOICES, required=False, help_text=field.help_text
                )


class StudyImportSerializer(serializers.ModelSerializer):
    """A study being created from a large items file by a worker."""

    study: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    url = serializers.SerializerMethodField(help_text="Where to ask for this import's status.")

    class Meta:
        model = StudyImport
        fields = [
            "id",
            "status",
            "study_name",
            "kind",
            "original_name",
            "size_bytes",
            "problems",
            "error",
            "study",
            "created_at",
            "finished_at",
            "url",
        ]

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, job: StudyImport) -> str:
        return self.context["request"].build_absolute_uri(reverse("api-study-import", args=[job.pk]))


CREATE_FROM_JUDGE = OpenApiExample(
    "From judged generations",
    request_only=True,
    media_type="application/json",
    value={
        "name": "Pilot 1",
        "judge": "How2Judge",
        "n_judged": 200,
        "seed": 0,
        "annotators_per_item": 3,
        "payment_per_item": "0.25",
    },
    description="200 judged generations of How2Judge, stratified by topic and label (create_study --from-judge).",
)
CREATE_FROM_JUDGE_RUN = OpenApiExample(
    "From one judge run",
    request_only=True,
    media_type="application/json",
    value={"name": "Pilot on qwen3-8b", "judge_runs": [12], "n_judged": 100, "topics": ["food-dining"]},
    description="100 judgments of judge run 12 (its judge), of Food & Dining procedures only.",
)
CREATE_FROM_FILE = OpenApiExample(
    "From an items file",
    request_only=True,
    media_type="multipart/form-data",
    value={
        "name": "Gold pilot",
        "kind": DEFAULT_KIND_KEY,
        "items_file": "items.jsonl",
        "annotators_per_item": 3,
        "qualification_enabled": "auto",
    },
    description="curl -F name='Gold pilot' -F items_file=@items.jsonl ... (one item per line; bad lines: 400 with "
    "file, line and field; nothing is created).",
)
