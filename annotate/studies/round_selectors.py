"""Reads of a study's pilot rounds: the rounds of a study and each round's row on the study page
(its counted annotations, exclusions and alpha as the study's kind computes it, cached with
the state of the annotations it was computed from)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max, Q

from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_MAIN
from annotate.kinds.columns import AnswerRecord
from annotate.models import Annotation, Study
from annotate.participation.flags import FLAG_BROKEN, FLAG_UNSURE
from annotate.stats.agreement import annotation_counts


def study_rounds(study: Study) -> list[Study]:
    root = study.round_root
    return list(
        Study.objects.filter(Q(pk=root.pk) | Q(first_round=root))
        .select_related("guideline_version")
        .order_by("round", "pk")
    )


# The study page's round alphas are kept (in Django's cache) with the state of the round's
# annotations they were computed from, and computed again when that state changes. A round
# whose computation took ROUND_ALPHA_SLOW_SECONDS or more (tens of thousands of annotations,
# 1,000 resamples) shows its last value for up to ROUND_ALPHA_REUSE_SECONDS while annotations
# keep arriving, marked with when it was computed and how many annotations came since.
ROUND_ALPHA_SLOW_SECONDS = 0.5
ROUND_ALPHA_REUSE_SECONDS = 60
ROUND_SUMMARY_CACHE_SECONDS = 7 * 24 * 3600


def study_round_summaries(study: Study) -> list[dict[str, Any]]:
    """One row per pilot round: counted annotations (``n_annotations``), exclusions
    (``n_excluded``, and ``n_surplus`` surplus annotations left out as well), the agreement
    report's own counts (``annotation_counts``) and Krippendorff's alpha, over the
    label the study's kind has (``_round_alpha``; for critical failure the binary has_failure,
    for which How2Everything §4.3 reports 0.273 in its pilots and 0.593 at the end, with its
    95 % interval and n as the agreement page shows them). A row shown from an earlier
    computation while annotations arrive carries ``as_of`` and ``n_new`` (see above)."""
    return [_round_summary(round_study) for round_study in study_rounds(study)]


def _round_state(study: Study) -> list[int]:
    """What a round's row depends on, in one indexed aggregate: its annotations (test
    participants' aside; only ever added, never edited), the excluded and the surplus ones
    among them, the newest id."""
    state = Annotation.objects.filter(study=study, is_test=False).aggregate(
        n=Count("pk"),
        n_excluded=Count("pk", filter=Q(excluded=True)),
        n_surplus=Count("pk", filter=Q(surplus=True)),
        n_flagged=Count("pk", filter=~Q(flag="")),
        last=Max("pk"),
    )
    return [state["n"], state["n_excluded"], state["n_surplus"], state["last"] or 0, state["n_flagged"]]


def _round_summary(round_study: Study) -> dict[str, Any]:
    state = _round_state(round_study)
    # v4: n_annotations counts only counted annotations (issue 27; older entries counted all) and
    # rows carry alpha_interval.
    # v5: rows carry n_broken and n_unsure (issue 31).
    key = f"annotate:round-summary:v5:{round_study.pk}:{round_study.created_at.timestamp()}"
    try:
        cached = cache.get(key)
    except Exception:  # a cache that cannot answer (Redis down) costs a computation, never the page
        cached = None
    now = time.time()
    if cached is not None and cached["state"] == state:
        return {**cached["summary"], "study": round_study}
    if (
        cached is not None
        and cached["seconds"] >= ROUND_ALPHA_SLOW_SECONDS
        and now - cached["computed_at"] < ROUND_ALPHA_REUSE_SECONDS
    ):
        return {
            **cached["summary"],
            "study": round_study,
            "n_new": max(0, state[0] - cached["state"][0]),
            "as_of": datetime.fromtimestamp(cached["computed_at"], tz=UTC),
        }
    started = time.perf_counter()
    rows = _round_rows(round_study)
    summary = {
        # The agreement report's own counts (annotation_counts): counted annotations, and the
        # excluded and surplus ones left out beside them, so the two pages never differ.
        **annotation_counts(
            (r["excluded"], r["surplus"], r["flag"] == FLAG_BROKEN, r["flag"] == FLAG_UNSURE) for r in rows
        ),
        **_round_alpha(round_study, rows),
    }
    try:
        cache.set(
            key,
            {"state": state, "summary": summary, "computed_at": now, "seconds": time.perf_counter() - started},
            ROUND_SUMMARY_CACHE_SECONDS,
        )
    except Exception:  # as above: the next render computes again
        pass
    return {**summary, "study": round_study}


# What every pilot round's row has, whatever the kind (the kind's own columns join them).
ROUND_ROW_FIELDS = ("item_id", "annotator", "excluded", "surplus", "source", "flag")


def _round_rows(study: Study) -> list[dict[str, Any]]:
    """The round's annotations (test participants' aside, as the agreement report reads them)
    in the export's shape that its alpha reads: ``ROUND_ROW_FIELDS`` and the study's kind's
    own answer columns (``StudyKind.answer_cells``: critical failure's has_failure and
    failures, multiple choice's choice, ...), read as plain values. A qualification or
    attention-check answer counts as excluded (``parse_annotation_record``), so it never
    enters alpha."""
    kind = kind_get(study.kind)
    fields = (
        "item__item_id",
        "annotator__pid",
        "has_failure",
        "failures",
        "answer",
        "excluded",
        "surplus",
        "source",
        "flag",
    )
    rows = Annotation.objects.filter(study=study, is_test=False).order_by("submitted_at", "pk").values_list(*fields)
    return [
        {
            "item_id": item_id,
            "annotator": pid,
            # A qualification or attention-check answer is left out as excluded, as in the report.
            "excluded": excluded or source != ROLE_MAIN,
            "surplus": surplus,
            "source": source,
            # "broken": left out as the report leaves it out (parse_annotation_record)
            "flag": flag,
            **kind.answer_cells(
                AnswerRecord(
                    answer=answer if isinstance(answer, dict) else {},
                    has_failure=has_failure,
                    failures=failures,
                    broken=flag == FLAG_BROKEN,
                )
            ),
        }
        for item_id, pid, has_failure, failures, answer, excluded, surplus, source, flag in rows.iterator(
            chunk_size=2000
        )
    ]


def _round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The alpha of a round's row, as the study's kind computes it (``StudyKind.round_alpha``:
    multiple choice over the options; constraint faithfulness over question 3, steps correct;
    critical failure over the binary has_failure label, the agreement report's own numbers),
    for every kind with ``alpha_ci95`` (95% bootstrap over the items), ``alpha_n`` (items with
    two or more counted answers), ``alpha_ci95_not_estimable`` (why the interval is null when
    every resample gives the same alpha), ``alpha_small_sample`` and ``alpha_undefined``."""
    return kind_get(study.kind).round_alpha(study, rows)
