"""A study's settings: the dataclass every creation path fills (the New study page, the API,
``manage.py create_study``, a worker's import), read from a form's or a file's values, and checked
against the items and the kind (problems naming the field)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

from annotate import constants as C
from annotate.kinds.base import (
    REPORT_AGREEMENT,
    ROLE_ATTENTION,
    ROLE_MAIN,
    ROLE_QUALIFICATION,
    FieldError,
    ItemSpec,
    StudyKind,
)
from annotate.participation.allocation import POLICIES, POLICY_ACTIVE, POLICY_FIXED, is_dynamic, judge_has_failure_of
from annotate.stats.majority import check_min_annotations

PROLIFIC_STUDY_ID_RE = re.compile(C.PROLIFIC_STUDY_ID_PATTERN)


@dataclass
class StudySettings:
    annotators_per_item: int = C.ANNOTATORS_PER_ITEM_DEFAULT
    # None: the kind's default (annotate/kinds: 90 s, 45 s for constraint faithfulness).
    min_seconds: int | None = None
    lease_minutes: int = C.LEASE_MINUTES_DEFAULT
    training_enabled: bool = True
    # None: on exactly when the items include gold qualification items (so the defaults work
    # for every source of items); True with no gold items is refused.
    qualification_enabled: bool | None = None
    qualification_pass: int | None = None
    # None: ATTENTION_CHECK_RATE_DEFAULT when the items include attention checks, else 0; a rate
    # above 0 with no attention-check items is refused (a study must not claim checks it lacks).
    attention_check_rate: float | None = None
    attention_max_failures: int = C.ATTENTION_MAX_FAILURES_DEFAULT
    max_items_per_annotator: int | None = None
    completion_code: str | None = None
    screened_out_code: str | None = None
    payment_per_item: Decimal | None = None
    items_per_page: int = 1
    # Annotations an item needs for a human majority (analysis only; docs/agreement.md).
    min_annotations_for_majority: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT
    # Prolific's id of the study: when set, the entry URL's STUDY_ID must equal it.
    prolific_study_id: str = ""
    # Accept PIDs that do not look like Prolific's (demos, pilots, tests); off for new studies.
    allow_other_pids: bool = False
    # How annotators are spent (annotate/participation/allocation.py): "fixed" (k per item),
    # "dynamic" (k, then more while undecided, up to max_annotators_per_item) or "active"
    # (dynamic k, new items where they narrow the PPI++ How2Score interval most).
    allocation_policy: str = POLICY_FIXED
    # Dynamic k's most annotators per item; None: annotators_per_item + 1 under dynamic and active.
    max_annotators_per_item: int | None = None
    # The PPI++ How2Score interval width (0-1) at which the study stops offering items.
    target_interval_width: float | None = None


def study_settings_from(values: Mapping[str, Any]) -> StudySettings:
    """The settings of a new study from the values of the New study page, the API or
    ``manage.py create_study``, named as ``StudySettings``' fields: one mapping for all three.
    An absent, ``None`` or empty value takes the field's default (an empty completion code:
    one is made; no items per page: 1); anything else (``0``, ``False``) is kept as given."""
    given: dict[str, Any] = {}
    for field in fields(StudySettings):
        value = values.get(field.name)
        if value is not None and value != "":
            given[field.name] = value
    return StudySettings(**given)


def majority_threshold_problems(value: Any) -> list[str]:
    try:
        check_min_annotations(value)
    except ValueError:
        return [
            f"a human majority needs at least {C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN} annotations per item "
            f"(min annotations for majority between {C.MIN_ANNOTATIONS_FOR_MAJORITY_MIN} and "
            f"{C.MIN_ANNOTATIONS_FOR_MAJORITY_MAX}, got {value!r})"
        ]
    return []


def settings_resolved(s: StudySettings, items: list[ItemSpec]) -> tuple[bool, float]:
    """The qualification switch and attention-check rate a study gets: as given, or (None)
    decided by the items it has."""
    n_qual = sum(1 for i in items if i.role == ROLE_QUALIFICATION)
    n_attention = sum(1 for i in items if i.role == ROLE_ATTENTION)
    qualification = s.qualification_enabled if s.qualification_enabled is not None else n_qual > 0
    rate = s.attention_check_rate
    if rate is None:
        rate = C.ATTENTION_CHECK_RATE_DEFAULT if n_attention else 0.0
    return qualification, rate


def max_annotators_resolved(s: StudySettings) -> int | None:
    """The most annotators an item gets: None under fixed k; under dynamic k as given, or one
    more than the minimum (a third opinion) when not given."""
    if not is_dynamic(s.allocation_policy):
        return None
    if s.max_annotators_per_item is not None:
        return s.max_annotators_per_item
    return max(s.annotators_per_item, s.min_annotations_for_majority) + 1


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def allocation_problems(s: StudySettings, items: list[ItemSpec], kind_def: StudyKind) -> list[FieldError]:
    """Problems of the allocation settings (policy, maximum annotators, target width), each
    naming its field."""
    problems: list[FieldError] = []
    policy = s.allocation_policy
    if policy not in POLICIES:
        problems.append(
            FieldError(
                "allocation_policy", f"the allocation policy must be one of {', '.join(POLICIES)}, got {policy!r}"
            )
        )
        return problems
    labels = kind_def.has_report(REPORT_AGREEMENT)
    if policy != POLICY_FIXED and not labels:
        problems.append(
            FieldError(
                "allocation_policy",
                f"dynamic k and active selection decide an item by its has_failure labels; a {kind_def.label} "
                "study has none (use fixed)",
            )
        )
    maximum = s.max_annotators_per_item
    if maximum is not None:
        if not _whole(maximum) or not 1 <= maximum <= 100:
            problems.append(
                FieldError("max_annotators_per_item", "the maximum annotators per item must be between 1 and 100")
            )
        elif policy == POLICY_FIXED:
            problems.append(
                FieldError(
                    "max_annotators_per_item",
                    "a maximum of annotators per item applies to dynamic k and active selection; under fixed k every "
                    "item gets annotators per item",
                )
            )
        elif maximum < max(s.annotators_per_item, s.min_annotations_for_majority):
            problems.append(
                FieldError(
                    "max_annotators_per_item",
                    f"the maximum annotators per item ({maximum}) must be at least annotators per item "
                    f"({s.annotators_per_item}) and min annotations for majority ({s.min_annotations_for_majority})",
                )
            )
    width = s.target_interval_width
    if width is not None:
        if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0 < float(width) < 1:
            problems.append(
                FieldError(
                    "target_interval_width",
                    f"the target interval width is a share of the How2Score scale, above 0 and below 1 (0.10 = "
                    f"10 points), got {width!r}",
                )
            )
        elif not labels:
            problems.append(
                FieldError(
                    "target_interval_width",
                    f"the target width is the PPI++ How2Score interval's; a {kind_def.label} study has no has_failure "
                    "labels to compute it from",
                )
            )
    if (policy == POLICY_ACTIVE or width is not None) and labels:
        main = [i for i in items if i.role == ROLE_MAIN]
        unlabelled = [i.item_id for i in main if judge_has_failure_of(i.source) is None]
        if unlabelled:
            field = "allocation_policy" if policy == POLICY_ACTIVE else "target_interval_width"
            shown = ", ".join(unlabelled[:3]) + (f" and {len(unlabelled) - 3} more" if len(unlabelled) > 3 else "")
            problems.append(
                FieldError(
                    field,
                    f"active selection and a target width need the judge's label of every main item (items made from "
                    f'judged generations, or source.judge_label "has_failure" or "no_failure" in the file); {shown} have none',
                )
            )
    return problems


def settings_problems(s: StudySettings, items: list[ItemSpec], kind_def: StudyKind) -> list[FieldError]:
    """Every problem of the settings, each naming its field (the StudySettings attribute, which
    is also the New-study form's field)."""
    problems: list[FieldError] = []

    def problem(field: str, message: str) -> None:
        problems.append(FieldError(field, message))

    qualification, rate = settings_resolved(s, items)
    if not 1 <= s.annotators_per_item <= 100:
        problem("annotators_per_item", "annotators per item must be between 1 and 100")
    if s.min_seconds is not None and s.min_seconds < 0:
        problem("min_seconds", "the minimum seconds must be 0 or more")
    if s.lease_minutes < 1:
        problem("lease_minutes", "the lease must be at least 1 minute")
    if not 0 <= rate < 1:
        problem("attention_check_rate", "the attention-check rate must be at least 0 and below 1")
    if not 1 <= s.items_per_page <= C.MAX_ITEMS_PER_PAGE:
        problem("items_per_page", f"items per page must be between 1 and {C.MAX_ITEMS_PER_PAGE}")
    elif s.items_per_page != 1 and kind_def.page_template is None:
        problem(
            "items_per_page",
            f"items per page applies to kinds that show a page of items (multiple choice); "
            f"a {kind_def.label} study shows one item at a time (1)",
        )
    if s.max_items_per_annotator is not None and s.max_items_per_annotator < 1:
        problem("max_items_per_annotator", "the maximum items per annotator must be at least 1")
    for message in majority_threshold_problems(s.min_annotations_for_majority):
        problem("min_annotations_for_majority", message)
    for name in ("completion_code", "screened_out_code"):
        code = getattr(s, name)
        if code is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", code):
            problem(name, f"the {name.replace('_', ' ')} must be 1-64 letters, digits, '_' or '-'")
    if s.completion_code and s.completion_code == s.screened_out_code:
        problem("screened_out_code", "the completion code and the screened-out code must differ")
    if s.prolific_study_id and not PROLIFIC_STUDY_ID_RE.fullmatch(s.prolific_study_id):
        problem(
            "prolific_study_id",
            "the Prolific study id must be 1-100 letters, digits, '_' or '-' (Prolific's are "
            "24 hexadecimal characters)",
        )
    n_main = sum(1 for i in items if i.role == ROLE_MAIN)
    n_qual = sum(1 for i in items if i.role == ROLE_QUALIFICATION)
    n_attention = sum(1 for i in items if i.role == ROLE_ATTENTION)
    if n_main == 0:
        problem("items", "the study has no main-pool items (items without attention_check or qualification)")
    if qualification and n_qual == 0:
        problem(
            "qualification_enabled",
            'qualification is on but no item has a "qualification" answer; add gold items or turn qualification off',
        )
    if qualification and s.qualification_pass is not None and not 1 <= s.qualification_pass <= n_qual:
        problem(
            "qualification_pass",
            f"the qualification pass mark must be between 1 and {n_qual} (the number of gold items)",
        )
    if rate > 0 and n_attention == 0:
        problem(
            "attention_check_rate",
            f"the attention-check rate is {rate:g} but no item is an attention check (an "
            'item with "attention_check"); add attention-check items or set the rate to 0',
        )
    problems += allocation_problems(s, items, kind_def)
    return problems
