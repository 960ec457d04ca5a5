"""The critical-failure kind (How2Everything's How2Score protocol): ``definition`` (records,
drafts, submissions, known answers; pure), ``codebook.json`` (the training material) and
``study_results`` (a pilot round's alpha; the kind's results are the agreement and
metric-agreement reports of annotate/reports/). Its templates are
annotate/templates/annotate/kinds/critical_failure_*.html, its script
annotate/static/annotate/critical_failure.js."""

from annotate.kinds.critical_failure.definition import KEY, KIND

__all__ = ["KEY", "KIND"]
