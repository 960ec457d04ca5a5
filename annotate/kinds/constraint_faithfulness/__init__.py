"""The constraint-faithfulness kind (CoScript, Yuan et al. 2023): ``definition`` (records,
known answers, the goal's highlighted constraint; pure), ``questions`` (the questions, answers,
constraint and error types; pure), ``answers`` (drafts and submissions; pure), ``results``
(Fleiss' kappa, alpha, accuracy by constraint type, error types; pure) and ``study_results``
(the same read from a study's annotations). Its templates are
annotate/templates/annotate/kinds/constraint_faithfulness_*.html, its script
annotate/static/annotate/constraint_faithfulness.js."""

from annotate.kinds.constraint_faithfulness.definition import KEY, KIND

__all__ = ["KEY", "KIND"]
