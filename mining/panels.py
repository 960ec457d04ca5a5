"""Extra panels on the procedure page, contributed by apps that build on mining.

An app higher in the dependency chain (judging, annotate) registers a function in its
``AppConfig.ready``; mining never imports it. Each function takes the procedure and
returns ``(template_name, context)`` or ``None`` when it has nothing to show."""

from __future__ import annotations

from collections.abc import Callable

from mining.models import Procedure

PanelFunction = Callable[[Procedure], "tuple[str, dict] | None"]
_PANELS: list[PanelFunction] = []


def procedure_panel_register(panel: PanelFunction) -> None:
    if panel not in _PANELS:
        _PANELS.append(panel)


def procedure_panels(procedure: Procedure) -> list[tuple[str, dict]]:
    return [result for panel in _PANELS if (result := panel(procedure)) is not None]
