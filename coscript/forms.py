"""Forms of the CoScript pages: launching a run, filtering again, exporting, the goal table's filters."""

from __future__ import annotations

from django import forms

from coscript.constants import CONSTRAINT_TYPES, DEFAULT_FILTER_MODE, DEFAULT_K, FILTER_MODES, KEYWORD_BONUS, MAX_K
from coscript.models import CoScriptRun
from coscript.result_services import EXPORT_CHOICES
from coscript.selectors import GOAL_QUERY_MAX_CHARS, KEPT_FILTERS, REVIEW_FILTERS
from judging.models import LanguageModel
from llm.constants import EXECUTORS
from mining.models import Split

FILTER_MODE_LABELS = {
    "embedding+keyword": "embedding + keyword bonus (default)",
    "embedding": "embedding only",
    "keyword": "keyword only (every constraint word must appear)",
}
FILTER_MODE_CHOICES = [(mode, FILTER_MODE_LABELS.get(mode, mode)) for mode in FILTER_MODES]

# The splits abstract goals may come from; the constrained slice is never a source.
SOURCE_SPLIT_CHOICES = [("", "all procedures")] + [(s.value, s.label) for s in Split if s != Split.CONSTRAINED]


class CoScriptRunForm(forms.Form):
    name = forms.CharField(max_length=200)
    language_model = forms.ModelChoiceField(
        queryset=LanguageModel.objects.order_by("name"),
        label="Model",
        help_text="A registered language model; its role's endpoint answers.",
    )
    split = forms.ChoiceField(
        choices=SOURCE_SPLIT_CHOICES,
        required=False,
        label="Source split",
        help_text="Where the abstract goals come from.",
    )
    limit = forms.IntegerField(min_value=1, required=False, help_text="Abstract goals drawn with the seed; empty: all.")
    seed = forms.IntegerField(initial=0)
    k = forms.IntegerField(
        min_value=1,
        max_value=MAX_K,
        initial=DEFAULT_K,
        label="K",
        help_text="Candidate scripts per specific goal (CoScript §4.3: K = 2 suffices).",
    )
    filter_mode = forms.ChoiceField(choices=FILTER_MODE_CHOICES, initial=DEFAULT_FILTER_MODE)
    keyword_bonus = forms.FloatField(
        min_value=0, initial=KEYWORD_BONUS, help_text="Added to the target's similarity × share of constraint keywords."
    )
    screen = forms.BooleanField(
        required=False,
        initial=True,
        label="Sensitive-domain screen",
        help_text="Ask the model whether each goal is medical or legal (App. C.2).",
    )
    executor = forms.ChoiceField(choices=[(e, e) for e in EXECUTORS], initial="online")
    concurrency = forms.IntegerField(min_value=1, max_value=1024, initial=16)
    budget_usd = forms.DecimalField(min_value=0, required=False, label="Budget cap (USD)")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if CoScriptRun.objects.filter(name=name).exists():
            raise forms.ValidationError("a CoScript run with this name exists; choose another name")
        return name

    # Where a refusal of coscript_run_create belongs on the form, by the words of its message.
    SERVICE_ERROR_FIELDS = (
        ("named", "name"),
        ("name", "name"),
        ("k must", "k"),
        ("filter mode", "filter_mode"),
        ("limit", "limit"),
        ("keyword bonus", "keyword_bonus"),
        ("split", "split"),
        ("procedure pool", "split"),
        ("executor", "executor"),
        ("concurrency", "concurrency"),
    )

    def add_service_error(self, message: str) -> None:
        for words, field in self.SERVICE_ERROR_FIELDS:
            if words in message:
                self.add_error(field, message)
                return
        self.add_error(None, message)


class RefilterForm(forms.Form):
    mode = forms.ChoiceField(choices=FILTER_MODE_CHOICES, label="Filter mode")
    keyword_bonus = forms.FloatField(min_value=0, label="Keyword bonus")


class ExportForm(forms.Form):
    candidates = forms.ChoiceField(
        choices=[(c, c) for c in EXPORT_CHOICES],
        initial="selected",
        help_text="selected: each goal's chosen script; kept: every kept candidate; "
        "all: every candidate with steps (to annotate the filter itself).",
    )


class GoalFilterForm(forms.Form):
    """The run page's goal filters, with the choices the API's ``SpecificGoalFilter`` offers:
    a value outside them is an error naming the field (the page answers 400), never ignored."""

    constraint_type = forms.ChoiceField(choices=[("", "any type")] + [(t, t) for t in CONSTRAINT_TYPES], required=False)
    kept = forms.ChoiceField(choices=[("", "kept or not"), *KEPT_FILTERS.items()], required=False)
    review = forms.ChoiceField(
        choices=[("", "any review state")] + [(k, v.label) for k, v in REVIEW_FILTERS.items()], required=False
    )
    q = forms.CharField(required=False, max_length=GOAL_QUERY_MAX_CHARS, label="Words")
