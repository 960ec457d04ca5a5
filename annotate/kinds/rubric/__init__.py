"""Rubrics: study kinds defined as data (a YAML or JSON file, the New rubric page or the API).
``schema`` checks a rubric, ``definition`` builds its ``StudyKind``, ``results`` computes alpha
per question at its level of measurement, ``study_results`` reads a study's answers and
``services`` stores rubrics and registers their kinds. The editor is the package's too: its
pages (``views``), its endpoints (``apis``), their routes (``urls``), its command
(``commands``: ``manage.py rubric_create``) and its templates (``templates/``). ``SOURCE``
declares them to the registry (annotate/kinds/sources.py), which registers it as it does the
built-in kinds' ``KIND``."""

from annotate.kinds.sources import KindSource

SOURCE = KindSource(
    key="rubric",
    package=__name__,
    load_function="annotate.kinds.rubric.services.rubric_kinds_load",
    urls="annotate.kinds.rubric.urls",
    commands={"rubric_create": "annotate.kinds.rubric.commands.RubricCreateCommand"},
)

__all__ = ["SOURCE"]
