"""What the multiple-choice kind sets up once the app has started (``KIND.ready_function``):
the human accuracy of its studies feeds the goal-step leaderboards, beside the models'."""

from __future__ import annotations

from annotate.kinds.multiple_choice.study_results import choice_human_accuracy
from goalstep.validation import human_accuracy_provider_register


def choice_ready() -> None:
    human_accuracy_provider_register(choice_human_accuracy)
