"""Forms of the researchers' study pages (input parsing only; services decide)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django import forms
from django.core.validators import RegexValidator

from annotate import constants as C
from annotate.kinds import DEFAULT_KIND_KEY, kind_choices_fresh
from annotate.participation.allocation import POLICY_FIXED, POLICY_LABELS

QUALIFICATION_AUTO = "auto"
PROLIFIC_STUDY_ID = RegexValidator(
    C.PROLIFIC_STUDY_ID_PATTERN,
    "Letters, digits, '_' or '-' only (Prolific's study ids are 24 hexadecimal characters).",
)


class StudyCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=kind_choices_fresh, initial=DEFAULT_KIND_KEY)
    items_file = forms.FileField(
        required=False,
        label="Items file (JSONL)",
        help_text='One item per line in the shape of the kind (docs/annotation.md); critical failure: {"item_id", "topic", "goal", "reference_steps", "candidate_steps"}, '
        'optionally "attention_check": {"has_failure"} or "qualification": {"has_failure", "explanation"}.',
    )
    judge = forms.ChoiceField(required=False, label="Sample judged generations of judge", choices=())
    n_judged = forms.IntegerField(required=False, min_value=1, label="How many judged generations")
    seed = forms.IntegerField(required=False, initial=0)
    annotators_per_item = forms.IntegerField(min_value=1, max_value=100, initial=C.ANNOTATORS_PER_ITEM_DEFAULT)
    min_seconds = forms.IntegerField(
        required=False,
        min_value=0,
        help_text=f"Empty: the kind's default ({C.MIN_SECONDS_DEFAULT} s; {C.FAITHFULNESS_MIN_SECONDS_DEFAULT} s for "
        "constraint faithfulness).",
    )
    lease_minutes = forms.IntegerField(min_value=1, initial=C.LEASE_MINUTES_DEFAULT)
    training_enabled = forms.BooleanField(required=False, initial=True, label="Training")
    qualification_enabled = forms.ChoiceField(
        required=False,
        initial=QUALIFICATION_AUTO,
        label="Qualification test",
        choices=[
            (QUALIFICATION_AUTO, "When the items include gold qualification items"),
            ("on", "On (the items must include gold qualification items)"),
            ("off", "Off"),
        ],
    )
    qualification_pass = forms.IntegerField(
        required=False, min_value=1, label="Gold items needed to pass", help_text="Empty: 80 % of the gold items."
    )
    attention_check_rate = forms.FloatField(
        required=False,
        min_value=0,
        max_value=0.99,
        help_text=f"Share of attention checks among the items an annotator sees. Empty: {C.ATTENTION_CHECK_RATE_DEFAULT} when "
        "the items include attention-check items, else none; a rate above 0 needs attention-check items.",
    )
    attention_max_failures = forms.IntegerField(min_value=0, initial=C.ATTENTION_MAX_FAILURES_DEFAULT)
    max_items_per_annotator = forms.IntegerField(required=False, min_value=1)
    completion_code = forms.CharField(required=False, max_length=64)
    screened_out_code = forms.CharField(required=False, max_length=64)
    payment_per_item = forms.DecimalField(required=False, min_value=0, max_digits=8, decimal_places=2)
    items_per_page = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=C.MAX_ITEMS_PER_PAGE,
        initial=1,
        label="Items per page",
        help_text=f"Multiple-choice studies: questions shown on one page (1-{C.MAX_ITEMS_PER_PAGE}; the paper: 15, or 30 for "
        "step ordering; empty: 1). The other kinds show one item at a time.",
    )
    slug = forms.CharField(
        required=False,
        max_length=100,
        label="Slug",
        help_text="The study's address (/a/<slug>/): lowercase letters, digits and '-'. Empty: made from the name.",
    )
    min_annotations_for_majority = forms.IntegerField(
        required=False,
        min_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN,
        max_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX,
        initial=C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
        label="Annotations for a human majority",
        help_text=f"An item needs at least this many counted annotations (at least 2: one annotation is not a "
        f"majority) to be compared with judges; items with fewer are left out and counted. Empty: "
        f"{C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT}.",
    )
    prolific_study_id = forms.CharField(
        required=False,
        max_length=100,
        label="Prolific study id",
        validators=[PROLIFIC_STUDY_ID],
        help_text="When set, only links carrying this STUDY_ID may enter (Prolific fills it in); can be set later on "
        "the study page. Empty: any STUDY_ID.",
    )
    allow_other_pids = forms.BooleanField(
        required=False,
        initial=False,
        label="Accept participant ids that are not Prolific's",
        help_text="Off: the PROLIFIC_PID must be 24 hexadecimal characters, as Prolific's are. On: any 1-64 letters, "
        "digits, '_' or '-' (demos, pilots with colleagues).",
    )
    allocation_policy = forms.ChoiceField(
        required=False,
        initial=POLICY_FIXED,
        label="Allocation of annotators",
        choices=list(POLICY_LABELS.items()),
        help_text="Fixed k: every item gets annotators per item. Dynamic k: annotators per item, then one more "
        "while the item is undecided (its annotators disagree, or agree against the judge), up to the maximum "
        "below. Active selection: dynamic k, and new items come from the topic where a label narrows the "
        "calibrated How2Score's interval most (needs the judge's label on every item).",
    )
    max_annotators_per_item = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100,
        label="Most annotators per item (dynamic k)",
        help_text="Dynamic k and active selection only. Empty: one more than annotators per item.",
    )
    target_interval_width = forms.FloatField(
        required=False,
        min_value=0.001,
        max_value=0.999,
        label="Target interval width",
        help_text="The study stops offering items (and closes its Prolific study) once the 95 % interval of the "
        "calibrated How2Score is this narrow, on 0-1 (0.10 = 10 points). Empty: no target.",
    )
    instructions = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 10}), help_text="Empty: the kind's default guidelines."
    )

    def clean_min_annotations_for_majority(self) -> int:
        value = self.cleaned_data.get("min_annotations_for_majority")
        return C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT if value is None else value

    def __init__(self, *args, judges: Sequence[str] = (), **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["judge"]).choices = [("", "— none —")] + [(j, j) for j in judges]

    def clean_qualification_enabled(self) -> bool | None:
        """None: decided by the items (the service's default); an older form's unticked box
        posts nothing, which means off."""
        meaning: dict[str | None, bool | None] = {QUALIFICATION_AUTO: None, "on": True}
        return meaning.get(self.cleaned_data.get("qualification_enabled"), False)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns
        if not data.get("items_file") and not data.get("judge"):
            raise forms.ValidationError("Upload an items file, choose a judge to sample judged generations, or both.")
        if data.get("judge") and not data.get("n_judged"):
            self.add_error("n_judged", "Say how many judged generations to sample.")
        return data


class StudySettingsForm(forms.Form):
    is_open = forms.BooleanField(required=False, label="Open to new annotators")
    payment_per_item = forms.DecimalField(
        required=False, min_value=0, max_digits=8, decimal_places=2, label="Payment per item (USD)"
    )
    min_annotations_for_majority = forms.IntegerField(
        required=False,
        min_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN,
        max_value=C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX,
        label="Annotations for a human majority",
    )
    prolific_study_id = forms.CharField(
        required=False, max_length=100, label="Prolific study id", validators=[PROLIFIC_STUDY_ID]
    )
    allow_other_pids = forms.BooleanField(required=False, label="Accept participant ids that are not Prolific's")


class RoundCreateForm(forms.Form):
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 10}), label="Guidelines of the new round")
