"""The constraint-faithfulness kind (CoScript, Yuan et al. 2023): ``definition`` (records,
drafts, submissions, known answers, the goal's highlighted constraint; pure), ``results``
(Fleiss' kappa, alpha, accuracy by constraint type, error types; pure) and ``study_results``
(the same read from a study's annotations). Its templates are
annotate/templates/annotate/kinds/constraint_faithfulness_*.html, its script
annotate/static/annotate/constraint_faithfulness.js."""

from annotate.kinds.constraint_faithfulness.definition import KEY, KIND

__all__ = ["KEY", "KIND"]
