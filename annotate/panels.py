"""Extra panels on a study's page, contributed by apps that build on annotate.

An app higher in the dependency chain (prolific) registers a function in its
``AppConfig.ready``; annotate never imports it. Each function takes the study and the request
and returns ``(template_name, context)`` or ``None`` when it has nothing to show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from annotate.models import Study

StudyPanelFunction = Callable[[Study, Any], "tuple[str, dict] | None"]
_PANELS: list[StudyPanelFunction] = []


def study_panel_register(panel: StudyPanelFunction) -> None:
    if panel not in _PANELS:
        _PANELS.append(panel)


def study_panels(study: Study, request: Any) -> list[tuple[str, dict]]:
    return [result for panel in _PANELS if (result := panel(study, request)) is not None]
