"""Rubrics: study kinds defined as data (a YAML or JSON file, the New rubric page or the API).
``schema`` checks a rubric, ``definition`` builds its ``StudyKind``, ``results`` computes alpha
per question at its level of measurement, ``study_results`` reads a study's answers and
``services`` stores rubrics and registers their kinds."""
