"""Agreement of annotators with each other and of judges with them, and the agreement
report. Pure Python and NumPy, no Django (How2Everything §4.3 and Figure 3).

* **Judge agreement** with the human majority (``majority.py``): overall, per majority
  class, Cohen's kappa, the confusion matrix, n and a bootstrap interval for each rate.
* **Leave-one-out human agreement** per annotator (against the strict majority of the
  *other* annotators of each item, under the same threshold).
* **Pairwise agreement** between every two judges and every two annotators.

``agreement_report`` puts these in one JSON-ready dict with Krippendorff's alpha in three
kinds (``alpha.py``), the human majority's counts and each judge's calibrated score
(``calibration.py``). Every undefined value is ``None`` (JSON null), never a made-up number;
every result is independent of the order of the input rows (items, annotators, judges and
values are sorted before anything is computed or resampled)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from annotate import constants as C
from annotate.stats.alpha import ALPHA_KINDS, alpha_by_kind, alpha_undefined_reason
from annotate.stats.bootstrap import (
    DEFAULT_BOOTSTRAP,
    SeedLike,
    bootstrap_share_interval,
    check_bootstrap,
    estimable_interval,
    rate,
    sample_size_note,
    seed_sequence,
    sub_seed,
)
from annotate.stats.calibration import calibrated_score
from annotate.stats.kappa import cohen_kappa, kappa_interval
from annotate.stats.majority import (
    HumanMajority,
    check_min_annotations,
    check_rows,
    judgment_labels,
    label_name,
    labels_by_item,
    majority_label,
    majority_of_items,
)
from annotate.stats.records import HAS_FAILURE, NO_FAILURE, AnnotationRow, JudgmentRow
from core.intervals import bootstrap_mean_interval

PAIR_SEPARATOR = "|"


def _confusion(human: Sequence[bool], judge: Sequence[bool]) -> dict[str, dict[str, int]]:
    table = {f"human_{label_name(h)}": {f"judge_{label_name(j)}": 0 for j in (True, False)} for h in (True, False)}
    for h, j in zip(human, judge):
        table[f"human_{label_name(h)}"][f"judge_{label_name(j)}"] += 1
    return table


def judge_agreement(
    majority: HumanMajority,
    judge_labels: Mapping[str, bool],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: SeedLike = 0,
) -> dict[str, Any]:
    """One judge against the human majority.

    ``majority`` is the items' human majority (``human_majority``); ``judge_labels`` maps
    item_id to the judge's has_failure label. The denominator ``n`` is the number of items
    with both a human majority and a judge label. Returns ``agreement`` (matches / n),
    ``agreement_has_failure`` (matches / majority-has_failure items, ``n_has_failure``),
    ``agreement_no_failure`` (matches / majority-no_failure items, ``n_no_failure``),
    ``cohen_kappa``, ``n``, 95 % percentile bootstrap intervals ``ci95`` (resampling the n
    items), ``ci95_has_failure`` and ``ci95_no_failure`` (resampling the items of that
    class) and ``cohen_kappa_ci95``, ``confusion`` (human majority row x judge column) and
    the judged items left out, by reason: ``n_human_tie`` (the annotators tie),
    ``n_too_few_annotations`` (fewer than ``majority.min_annotations`` annotations) and
    ``n_no_human_labels`` (nobody annotated it); ``n_judged`` = n + the three. Rates with a
    zero denominator are ``None``."""
    decided = majority.decided()
    items = sorted(item for item in judge_labels if item in decided)
    human = [decided[item] for item in items]
    judge = [judge_labels[item] for item in items]
    matches = [1.0 if h == j else 0.0 for h, j in zip(human, judge)]
    on_has = [m for m, h in zip(matches, human) if h]
    on_no = [m for m, h in zip(matches, human) if not h]
    reasons = [majority.reason(item) for item in judge_labels]
    return {
        "agreement": rate(int(sum(matches)), len(items)),
        "agreement_has_failure": rate(int(sum(on_has)), len(on_has)),
        "agreement_no_failure": rate(int(sum(on_no)), len(on_no)),
        "cohen_kappa": cohen_kappa(human, judge),
        "n": len(items),
        "n_has_failure": len(on_has),
        "n_no_failure": len(on_no),
        "ci95": bootstrap_mean_interval(matches, bootstrap=bootstrap, seed=seed),
        "ci95_has_failure": bootstrap_share_interval(
            int(sum(on_has)), len(on_has), bootstrap=bootstrap, seed=sub_seed(seed, HAS_FAILURE)
        ),
        "ci95_no_failure": bootstrap_share_interval(
            int(sum(on_no)), len(on_no), bootstrap=bootstrap, seed=sub_seed(seed, NO_FAILURE)
        ),
        "cohen_kappa_ci95": kappa_interval(human, judge, bootstrap=bootstrap, seed=sub_seed(seed, "kappa")),
        "confusion": _confusion(human, judge),
        "n_judged": len(judge_labels),
        "n_human_tie": reasons.count("tie"),
        "n_too_few_annotations": reasons.count("too_few"),
        "n_no_human_labels": reasons.count("no_annotations"),
    }


def leave_one_out_agreement(
    annotations: Iterable[AnnotationRow],
    *,
    min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
    bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """For each annotator (sorted): over the items they labelled, the fraction where their
    label equals the strict majority of the *other* counted annotators of that item,
    under the same rule as the human majority: the others must number at least
    ``min_annotations``.

    Returns ``{"agreement", "ci95", "n", "n_items", "n_others_tie", "n_others_too_few",
    "n_no_others"}``: ``n`` is the denominator (items where the others have a majority);
    ``n_others_tie`` items (the others tie), ``n_others_too_few`` items (fewer than
    ``min_annotations`` others) and ``n_no_others`` items (nobody else labelled it) are left
    out, so ``n_items = n + n_others_tie + n_others_too_few + n_no_others``. ``ci95`` is a
    95 % percentile bootstrap over the annotator's n items (``None`` with ``bootstrap`` 0)."""
    check_min_annotations(min_annotations)
    rows, _ = check_rows(annotations)
    by_item = labels_by_item(rows)
    stats: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"matches": [], "n_items": 0, "tie": 0, "few": 0, "alone": 0}
    )
    for labels in by_item.values():
        for annotator, label in labels.items():
            entry = stats[annotator]
            entry["n_items"] += 1
            others = [other for name, other in labels.items() if name != annotator]
            if not others:
                entry["alone"] += 1
                continue
            if len(others) < min_annotations:
                entry["few"] += 1
                continue
            others_majority = majority_label(others)
            if others_majority is None:
                entry["tie"] += 1
                continue
            entry["matches"].append(1.0 if label == others_majority else 0.0)
    return {
        annotator: {
            "agreement": rate(int(sum(entry["matches"])), len(entry["matches"])),
            "ci95": bootstrap_share_interval(
                int(sum(entry["matches"])),
                len(entry["matches"]),
                bootstrap=bootstrap,
                seed=seed_sequence(seed, "leave_one_out", annotator),
            ),
            "n": len(entry["matches"]),
            "n_items": entry["n_items"],
            "n_others_tie": entry["tie"],
            "n_others_too_few": entry["few"],
            "n_no_others": entry["alone"],
        }
        for annotator, entry in sorted(stats.items())
    }


def pair_key(a: str, b: str) -> str:
    """``"<A>|<B>"`` with the two names in sorted order."""
    first, second = sorted((a, b))
    return f"{first}{PAIR_SEPARATOR}{second}"


def pairwise_agreement(
    labels_by_item: Mapping[str, Mapping[str, bool]],
    *,
    raters: Iterable[str] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Agreement between every two raters over the items both labelled.

    ``labels_by_item`` maps item_id to {rater: has_failure}. Keys are ``pair_key(A, B)``;
    each value holds ``raters`` ([A, B], sorted), ``agreement`` (equal labels / n),
    ``ci95`` (95 % percentile bootstrap over the n shared items; ``None`` with
    ``bootstrap`` 0), ``cohen_kappa`` and ``n`` (shared items). Without ``raters`` only pairs with at least
    one shared item appear; with ``raters`` every pair of them appears, ``agreement``
    ``None`` where they share no item. Raises ``ValueError`` if two different pairs would
    get the same key (names containing ``|``)."""
    pairs: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    if raters is not None:
        for a, b in combinations(sorted(set(raters)), 2):
            pairs[(a, b)] = []
    for item in sorted(labels_by_item):
        labels = labels_by_item[item]
        for a, b in combinations(sorted(labels), 2):
            if raters is None or (a, b) in pairs:
                pairs[(a, b)].append((labels[a], labels[b]))
    result: dict[str, dict[str, Any]] = {}
    for (a, b), shared in sorted(pairs.items()):
        key = pair_key(a, b)
        if key in result:
            raise ValueError(f"rater names {a!r} and {b!r} give a pair key {key!r} that is already used")
        left = [x for x, _ in shared]
        right = [y for _, y in shared]
        result[key] = {
            "raters": [a, b],
            "agreement": rate(sum(1 for x, y in shared if x == y), len(shared)),
            "ci95": bootstrap_share_interval(
                sum(1 for x, y in shared if x == y),
                len(shared),
                bootstrap=bootstrap,
                seed=seed_sequence(seed, "pair", key),
            ),
            "cohen_kappa": cohen_kappa(left, right),
            "n": len(shared),
        }
    return result


# --------------------------------------------------------------------------- the report


def _alpha_section(rows: Sequence[AnnotationRow], bootstrap: int, seed: int) -> dict[str, Any]:
    """The report's alpha keys from checked rows (``check_rows``): ``alpha``, ``alpha_ci95``,
    ``alpha_ci95_not_estimable``, ``alpha_details``, ``alpha_undefined`` and
    ``alpha_small_sample``. A zero-width interval (every resample gave the same alpha) is
    null, with the sentence saying so in ``alpha_ci95_not_estimable``."""
    # One stream of resamples for the three kinds, so their intervals are paired.
    by_kind = alpha_by_kind(rows, bootstrap=bootstrap, rng=np.random.default_rng(seed_sequence(seed, "alpha")))
    alpha = {kind: value for kind, (value, _, _) in by_kind.items()}
    alpha_details = {kind: details for kind, (_, _, details) in by_kind.items()}
    estimable = {
        kind: estimable_interval(alpha_details[kind]["n_units"], interval) for kind, (_, interval, _) in by_kind.items()
    }
    alpha_ci95 = {kind: interval for kind, (interval, _) in estimable.items()}
    return {
        "alpha": alpha,
        "alpha_ci95": alpha_ci95,
        "alpha_ci95_not_estimable": {kind: reason for kind, (_, reason) in estimable.items()},
        "alpha_details": alpha_details,
        "alpha_undefined": {
            kind: alpha_undefined_reason(alpha_details[kind]) if alpha[kind] is None else None for kind in ALPHA_KINDS
        },
        "alpha_small_sample": {
            kind: sample_size_note(alpha_details[kind]["n_units"], alpha_ci95[kind])
            if alpha[kind] is not None
            else None
            for kind in ALPHA_KINDS
        },
    }


def alpha_report(
    annotations: Iterable[AnnotationRow], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """The alpha keys of ``agreement_report`` alone (the same values and intervals for the
    same rows, bootstrap and seed): for pages that show alpha without the rest."""
    check_bootstrap(bootstrap)
    seed_sequence(seed)
    rows, _ = check_rows(annotations)
    return _alpha_section(rows, bootstrap, seed)


DENOMINATORS: dict[str, str] = {
    "n_items": "distinct item_id values with at least one counted annotation (not excluded, not surplus)",
    "n_annotators": "distinct annotators with at least one counted annotation",
    "n_annotations": (
        "counted annotation rows; rows with excluded=true are counted in n_excluded, rows with surplus=true "
        "(a late submit into an item that already had its k counted annotations) in n_surplus, and both are "
        "used nowhere (a row that is both is counted once, in n_excluded)"
    ),
    "alpha": (
        "Krippendorff's alpha over items with at least two counted annotations (alpha_details.n_units); "
        "items with one annotation cannot be paired and are counted in alpha_details.n_single; null when no "
        "item has two annotations or the paired values never vary"
    ),
    "alpha.first_failure_location": (
        "nominal over 'none' (no failure reported), the smallest linked L2 step, or 'unlocated' "
        "(failures reported, no L2 step linked)"
    ),
    "alpha.l2_step_sets_masi": "the union of linked L2 steps per annotation; MASI distance, 0 between two empty sets",
    "alpha_ci95": (
        "95% percentile bootstrap resampling the pairable items with replacement (the same resamples for the three "
        "kinds); resamples where alpha is undefined are left out and counted in alpha_details.n_bootstrap_undefined; "
        "null when every resample gives the same alpha (a zero-width interval, see alpha_ci95_not_estimable)"
    ),
    "alpha_ci95_not_estimable": (
        "per kind: null, or 'interval not estimable (n = N): ...' when every bootstrap resample of the N pairable "
        "items gives the same alpha (too few items to vary), so alpha_ci95 is null rather than a zero-width interval"
    ),
    "human_majority": (
        "strict majority (more than half) of an item's counted has_failure labels, for items with at least "
        "min_annotations (default 2, never fewer) of them: one annotation is a label, not a majority; items with "
        "fewer are counted in n_too_few and left out of judge agreement, leave-one-out and calibration; an even "
        "split is a tie, has no majority and is counted in n_ties; "
        "n_items = n_with_majority + n_ties + n_too_few and n_with_majority = has_failure + no_failure"
    ),
    "leave_one_out": (
        "per annotator: agreement = matches / n, n = their items where the OTHER annotators, at least "
        "min_annotations of them, have a strict majority; items where the others tie (n_others_tie), number fewer "
        "than min_annotations (n_others_too_few) or nobody else labelled it (n_no_others) are left out; ci95 is a "
        "95% percentile bootstrap over the n items"
    ),
    "judges": (
        "agreement = matches / n, n = items with a human majority and a label from this judge; "
        "agreement_has_failure and agreement_no_failure divide by n_has_failure and n_no_failure (the human "
        "majority class); judged items with a human tie (n_human_tie), with fewer than min_annotations "
        "annotations (n_too_few_annotations) or without annotations (n_no_human_labels) are left out, so "
        "n_judged = n + n_human_tie + n_too_few_annotations + n_no_human_labels; ci95 is a 95% percentile "
        "bootstrap of agreement resampling the n items, ci95_has_failure and ci95_no_failure resample the items "
        "of that class, cohen_kappa_ci95 resamples the n items; confusion rows are the human majority, columns "
        "the judge"
    ),
    "judge_pairs": (
        "agreement = equal labels / n, n = items both judges labelled (annotations not needed); every pair of "
        "judges, keys 'A|B' with the names sorted; ci95 is a 95% percentile bootstrap over the n items"
    ),
    "annotator_pairs": (
        "agreement = equal labels / n, n = items both annotators labelled (counted labels); only pairs with n > 0; "
        "ci95 is a 95% percentile bootstrap over the n items"
    ),
    "alpha_undefined": "per kind: null when alpha is defined, otherwise the sentence saying why it is not",
    "alpha_small_sample": "per kind: the small-sample note of alpha over its n_units items and its interval, or null",
    "small_sample": (
        f"a number resting on fewer than {C.SMALL_SAMPLE_ITEMS} items, or whose 95% interval is wider than "
        f"{C.WIDE_INTERVAL}, is shown with a note that its interval is wide"
    ),
    "calibration": (
        "Rogan-Gladen with positive class success = no_failure: corrected_score = (observed_score + tnr - 1) / "
        "(tpr + tnr - 1) clipped to [0, 1]; tpr = judge no_failure among human-majority no_failure (n_positive), "
        "tnr = judge has_failure among human-majority has_failure (n_negative), observed_score = the judge's "
        "no_failure fraction over all n_target items it judged; null when tpr + tnr - 1 <= 0 or a class is missing; "
        "only items with a human majority (see human_majority) give tpr and tnr"
    ),
    "null": "a rate whose denominator is 0, or a statistic that is undefined, is null",
}


def agreement_report(
    annotations: Iterable[AnnotationRow],
    judgments: Iterable[JudgmentRow],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
) -> dict[str, Any]:
    """The whole agreement report as a JSON-ready dict.

    Required keys (the command's interface): ``n_items``, ``n_annotators``,
    ``n_annotations``, ``alpha`` {binary, first_failure_location, l2_step_sets_masi},
    ``human_majority`` {min_annotations, n_items, n_with_majority, has_failure, no_failure,
    n_ties, n_too_few} (``HumanMajority.summary``), ``leave_one_out``
    {annotator: {agreement, n, ...}}, ``judges`` {judge: {agreement,
    agreement_has_failure, agreement_no_failure, cohen_kappa, n, ci95, ...}},
    ``judge_pairs`` {"A|B": {agreement, n, ...}}. Also: ``n_excluded``, ``n_surplus``, ``n_judgments``,
    ``alpha_ci95``, ``alpha_ci95_not_estimable`` (per kind, why alpha_ci95 is null for a
    defined alpha), ``alpha_details``, ``alpha_undefined`` (per kind, why alpha is null),
    ``alpha_small_sample`` and each judge's ``small_sample`` (``sample_size_note``),
    ``annotator_pairs``, ``calibration``, ``bootstrap`` and ``denominators`` (the text of
    every denominator and tie rule).

    Only counted annotations (``check_rows``: not excluded, not surplus) enter any statistic;
    ``n_excluded`` and ``n_surplus`` count the others. ``min_annotations`` (>= 2) is how many
    counted annotations an item needs for a human majority; items with fewer count in ``human_majority.n_too_few``.

    Bootstrap intervals use ``bootstrap`` resamples (0 turns them off: ``null``) and a
    generator seeded from ``seed`` and the statistic's name, so the report is the same on
    every run and for any order of the input rows. Raises ``ValueError`` for a negative
    ``bootstrap`` or ``seed``, a ``min_annotations`` below 2, duplicate (item, annotator)
    or (item, judge) rows, or an annotation with has_failure false and failures listed."""
    check_bootstrap(bootstrap)
    seed_sequence(seed)  # validates the seed
    check_min_annotations(min_annotations)
    rows, left_out = check_rows(annotations)
    judgment_list = list(judgments)
    by_judge = judgment_labels(judgment_list)
    by_item = labels_by_item(rows)
    majority = majority_of_items(by_item, min_annotations)
    decided = majority.decided()

    alphas = _alpha_section(rows, bootstrap, seed)

    judges = {
        judge: judge_agreement(majority, labels, bootstrap=bootstrap, seed=seed_sequence(seed, "judge", judge))
        for judge, labels in by_judge.items()
    }
    for result in judges.values():
        result["small_sample"] = sample_size_note(result["n"], result["ci95"]) if result["n"] else None
    judge_items: dict[str, dict[str, bool]] = defaultdict(dict)
    for judge, labels in by_judge.items():
        for item, label in labels.items():
            judge_items[item][judge] = label
    calibration = {}
    for judge, labels in by_judge.items():
        labelled = sorted(item for item in labels if item in decided)
        calibration[judge] = calibrated_score(
            [labels[item] for item in labelled],
            [decided[item] for item in labelled],
            list(labels.values()),
            bootstrap=bootstrap,
            seed=seed_sequence(seed, "calibration", judge),
        )

    return {
        "n_items": len(by_item),
        "n_annotators": len({row.annotator for row in rows}),
        "n_annotations": len(rows),
        "n_excluded": left_out.excluded,
        "n_surplus": left_out.surplus,
        "n_judgments": len(judgment_list),
        **alphas,
        "human_majority": majority.summary(),
        "leave_one_out": leave_one_out_agreement(rows, min_annotations=min_annotations, bootstrap=bootstrap, seed=seed),
        "annotator_pairs": pairwise_agreement(by_item, bootstrap=bootstrap, seed=seed),
        "judges": judges,
        "judge_pairs": pairwise_agreement(judge_items, raters=by_judge, bootstrap=bootstrap, seed=seed),
        "calibration": calibration,
        "bootstrap": {
            "resamples": bootstrap,
            "seed": seed,
            "interval": "95% percentile (2.5th and 97.5th percentiles, linear interpolation)",
            "resampling": "items with replacement; labelled and target items independently for calibration",
        },
        "denominators": DENOMINATORS,
    }
