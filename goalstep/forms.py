from __future__ import annotations

from django import forms

from goalstep.models import TaskSet
from judging.models import LanguageModel
from llm.constants import EXECUTORS


class TaskEvaluationForm(forms.Form):
    task_set = forms.ModelChoiceField(queryset=TaskSet.objects.order_by("-id"))
    language_model = forms.ModelChoiceField(queryset=LanguageModel.objects.order_by("name"), label="Model")
    prompt_file = forms.CharField(required=False, help_text="Empty: the task's prompt in goalstep/prompts/.")
    executor = forms.ChoiceField(choices=[(e, e) for e in EXECUTORS], initial="online")
    concurrency = forms.IntegerField(min_value=1, initial=16)
