"""The allocation panel on a study's page (registered by AnnotateConfig.ready through
annotate/panels.py, as other apps register theirs)."""

from __future__ import annotations

from typing import Any

from annotate.kinds import KindNotInstalled, kind_get
from annotate.kinds.base import REPORT_AGREEMENT
from annotate.models import Study
from annotate.participation.allocation import POLICY_FIXED
from annotate.participation.allocation_selectors import study_allocation


def allocation_panel(study: Study, request: Any) -> tuple[str, dict[str, Any]] | None:
    """The policy, the annotations used and the interval's width against the target; shown for
    studies with has_failure labels (the only ones that can leave fixed k or set a target)."""
    try:
        labels = kind_get(study.kind).has_report(REPORT_AGREEMENT)
    except KindNotInstalled:
        labels = False
    if not labels and study.allocation_policy == POLICY_FIXED and study.target_interval_width is None:
        return None
    return "annotate/allocation_panel.html", study_allocation(study)
