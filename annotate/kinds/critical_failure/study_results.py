"""What the study page shows of a critical-failure study beside its reports: a pilot round's
alpha over the binary has_failure label."""

from __future__ import annotations

from typing import Any

from annotate.models import Study
from annotate.stats.agreement import alpha_report
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP
from annotate.stats.records import parse_annotation_record


def round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The alpha of a round's annotation rows (``alpha``, ``alpha_ci95``, ``alpha_n`` items with
    two or more annotations, ``alpha_ci95_not_estimable``, ``alpha_small_sample``,
    ``alpha_undefined``), computed by the agreement report's own alpha (``alpha_report``, the
    same resamples and seed), so the study page and the agreement page show the same numbers
    and notes."""
    alphas = alpha_report(map(parse_annotation_record, rows), bootstrap=DEFAULT_BOOTSTRAP)
    return {
        "alpha": alphas["alpha"]["binary"],
        "alpha_ci95": alphas["alpha_ci95"]["binary"],
        "alpha_n": alphas["alpha_details"]["binary"]["n_units"],
        "alpha_ci95_not_estimable": alphas["alpha_ci95_not_estimable"]["binary"],
        "alpha_interval": alphas["alpha_interval"]["binary"],
        "alpha_small_sample": alphas["alpha_small_sample"]["binary"],
        "alpha_undefined": alphas["alpha_undefined"]["binary"],
    }
