"""The multiple-choice kind (crowd validation of the goal-step tasks, Zhang et al. 2020):
``definition`` (records, drafts, submissions, known answers; pure), ``results`` (Table 2 per
task, the gold and harder tiers; pure) and ``study_results`` (the same read from a study's
annotations, the tiers as task lines, human accuracy for the goal-step leaderboards). Its
templates are annotate/templates/annotate/kinds/multiple_choice_*.html, its script
annotate/static/annotate/multiple_choice.js."""

from annotate.kinds.multiple_choice.definition import KEY, KIND

__all__ = ["KEY", "KIND"]
