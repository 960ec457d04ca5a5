"""The data migration that gives a run's pause reason its own field (llm/run_models.py,
``Run.pause_reason``): runs that kept it in ``error`` while paused (generation, judge and
components runs, goal-step evaluations, CoScript runs) move it there; nothing stored is lost
either way (backwards, a pause reason goes back into ``error``, before any error it had)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import migrations
from django.db.models import F, TextField, Value
from django.db.models.functions import Concat

PAUSED = "paused"  # (RunStatus.PAUSED, as stored; a migration does not read the app's code)


def pause_reason_from_error(app_label: str, model_names: Sequence[str]) -> migrations.RunPython:
    """The ``RunPython`` operation moving the pause reasons of ``app_label``'s ``model_names``
    out of ``error`` (forwards) and back (backwards)."""

    def forwards(apps, schema_editor) -> None:
        for name in model_names:
            model = apps.get_model(app_label, name)
            model._default_manager.filter(status=PAUSED).exclude(error="").update(pause_reason=F("error"), error="")

    def backwards(apps, schema_editor) -> None:
        for name in model_names:
            manager = apps.get_model(app_label, name)._default_manager
            reasons = manager.exclude(pause_reason="")
            reasons.filter(error="").update(error=F("pause_reason"), pause_reason="")
            reasons.update(
                error=Concat(F("pause_reason"), Value("; "), F("error"), output_field=TextField()), pause_reason=""
            )

    return migrations.RunPython(forwards, backwards, elidable=False)
