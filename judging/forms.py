from django import forms

from judging.models import GenerationRun, LanguageModel, StepParser
from llm.constants import EXECUTORS
from mining.models import Split

EXECUTOR_CHOICES = [(e, e) for e in EXECUTORS]


class GenerationRunForm(forms.Form):
    name = forms.CharField(max_length=200)
    language_model = forms.ModelChoiceField(queryset=LanguageModel.objects.all(), label="Model")
    split = forms.ChoiceField(choices=Split.choices, initial=Split.BENCH)
    sample_per_topic = forms.IntegerField(min_value=1, required=False, help_text="Empty: the whole split.")
    seed = forms.IntegerField(initial=0)
    prompt_file = forms.CharField(required=False, help_text="Empty: the model's default prompt file.")
    executor = forms.ChoiceField(choices=EXECUTOR_CHOICES, initial="online")
    concurrency = forms.IntegerField(min_value=1, max_value=1024, initial=16)
    budget_usd = forms.DecimalField(min_value=0, required=False, label="Budget cap (USD)")
    step_parser = forms.ChoiceField(
        choices=[(value, label) for value, label in StepParser.choices if value != StepParser.FILE],
        initial=StepParser.PRODUCT,
        required=False,
        label="Step parser",
        help_text="How the completions' steps are read: ours, or the reference CLI's (to reproduce its numbers).",
    )

    def clean_name(self):
        name = self.cleaned_data["name"]
        if GenerationRun.objects.filter(name=name).exists():
            raise forms.ValidationError("a generation run with this name exists")
        return name


class JudgeRunForm(forms.Form):
    name = forms.CharField(max_length=200)
    generation_run = forms.ModelChoiceField(queryset=GenerationRun.objects.all())
    judge = forms.CharField(max_length=200, help_text="The judge's name on judgments, e.g. how2judge or gpt-5.")
    model = forms.CharField(required=False, help_text="Empty: the how2score_judge role's model.")
    base_url = forms.CharField(required=False)
    api_key_env = forms.CharField(required=False, help_text="Environment variable holding the API key.")
    prompt_file = forms.CharField(required=False, help_text="Empty: how2score_judge.txt")
    executor = forms.ChoiceField(choices=EXECUTOR_CHOICES, initial="online")
    concurrency = forms.IntegerField(min_value=1, max_value=1024, initial=16)
    budget_usd = forms.DecimalField(min_value=0, required=False, label="Budget cap (USD)")
