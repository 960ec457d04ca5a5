"""Agreement of annotators with each other and of judges with them, and the agreement
report. Pure Python and NumPy, no Django (How2Everything §4.3 and Figure 3).

* **Judge agreement** with the human majority (``majority.py``): overall, per majority
  class, Cohen's kappa, the confusion matrix, n, the Wilson interval of each rate and the BCa
  bootstrap interval of kappa.
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
from annotate.stats.agreement_text import BOOTSTRAP_METHOD, DENOMINATORS
from annotate.stats.alpha import ALPHA_KINDS, alpha_by_kind, alpha_undefined_reason
from annotate.stats.bootstrap import (
    DEFAULT_BOOTSTRAP,
    SeedLike,
    check_bootstrap,
    rate,
    sample_size_note,
    seed_sequence,
    share_interval,
    sub_seed,
)
from annotate.stats.calibration import calibrated_score, calibration_summary, ppi_score
from annotate.stats.kappa import cohen_kappa, kappa_estimate
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
from annotate.stats.records import AnnotationRow, JudgmentRow
from core.intervals import interval_fields

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
    ``cohen_kappa``, ``n``; the 95 % Wilson intervals of the three rates ``ci95``,
    ``ci95_has_failure`` and ``ci95_no_failure`` (Wilson 1927, each over its own n; closed
    form, given whatever ``bootstrap`` is) with ``interval``, ``interval_name`` and
    ``approximate`` (``core.intervals.interval_fields``); ``cohen_kappa_ci95``, the 95 % BCa
    bootstrap interval of kappa over the n items (``kappa_estimate``; null with ``bootstrap``
    0), ``cohen_kappa_ci95_not_estimable`` (why it is null for a defined kappa) and
    ``cohen_kappa_interval`` (its method, n and approximate flag); ``confusion`` (human
    majority row x judge column) and the judged items left out, by reason: ``n_human_tie``
    (the annotators tie), ``n_too_few_annotations`` (fewer than
    ``majority.min_annotations`` annotations) and ``n_no_human_labels`` (nobody annotated
    it); ``n_judged`` = n + the three. Rates with a zero denominator are ``None``."""
    decided = majority.decided()
    items = sorted(item for item in judge_labels if item in decided)
    human = [decided[item] for item in items]
    judge = [judge_labels[item] for item in items]
    matches = sum(1 for h, j in zip(human, judge) if h == j)
    on_has = [h == j for h, j in zip(human, judge) if h]
    on_no = [h == j for h, j in zip(human, judge) if not h]
    reasons = [majority.reason(item) for item in judge_labels]
    overall = share_interval(matches, len(items))
    kappa = kappa_estimate(human, judge, bootstrap=bootstrap, seed=sub_seed(seed, "kappa"))
    return {
        "agreement": rate(matches, len(items)),
        "agreement_has_failure": rate(sum(on_has), len(on_has)),
        "agreement_no_failure": rate(sum(on_no), len(on_no)),
        "cohen_kappa": kappa["cohen_kappa"],
        "n": len(items),
        "n_has_failure": len(on_has),
        "n_no_failure": len(on_no),
        **overall,
        "ci95_has_failure": share_interval(sum(on_has), len(on_has))["ci95"],
        "ci95_no_failure": share_interval(sum(on_no), len(on_no))["ci95"],
        "cohen_kappa_ci95": kappa["ci95"],
        "cohen_kappa_ci95_not_estimable": kappa["not_estimable"],
        "cohen_kappa_interval": {key: kappa[key] for key in ("interval", "interval_name", "approximate")},
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
    out, so ``n_items = n + n_others_tie + n_others_too_few + n_no_others``. ``ci95`` is the
    95 % Wilson interval of the agreement over the annotator's n items, with ``interval``,
    ``interval_name`` and ``approximate`` (``share_interval``; ``bootstrap`` and ``seed``
    are accepted for the report's signature and not used: a share is never bootstrapped)."""
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
    check_bootstrap(bootstrap)
    return {
        annotator: {
            "agreement": rate(int(sum(entry["matches"])), len(entry["matches"])),
            **share_interval(int(sum(entry["matches"])), len(entry["matches"])),
            "n": len(entry["matches"]),
            "n_items": entry["n_items"],
            "n_others_tie": entry["tie"],
            "n_others_too_few": entry["few"],
            "n_no_others": entry["alone"],
        }
        for annotator, entry in sorted(stats.items())
    }


def annotation_counts(flags: Iterable[tuple[bool, ...]]) -> dict[str, int]:
    """The annotation counts every page and API shows beside agreement (the agreement report,
    the pilot rounds' rows of the study page and the rounds API), from one rule so they never
    differ: ``n_annotations`` the counted rows (``AnnotationRow.counted``: not excluded, not
    surplus), ``n_excluded`` the excluded ones (excluded annotators, qualification and
    attention-check answers) and ``n_surplus`` the surplus ones (late submits into an item
    that already had its k counted annotations; a row both excluded and surplus is counted
    once, as excluded, as ``check_rows`` counts it), ``n_broken`` the ones the annotator
    flagged "This item is broken" (neither excluded nor surplus), and ``n_unsure`` how many of
    the counted ones were flagged "I'm unsure" (they count). ``flags``: ``(excluded, surplus,
    broken, unsure)`` of each row, the last two optional (``AnnotationRow`` fields, or the
    database columns; a qualification or attention-check answer is excluded:
    ``parse_annotation_record``)."""
    counts = {"n_annotations": 0, "n_excluded": 0, "n_surplus": 0, "n_broken": 0, "n_unsure": 0}
    for row_flags in flags:
        excluded, surplus, broken, unsure = (tuple(row_flags) + (False, False))[:4]
        if excluded:
            counts["n_excluded"] += 1
        elif surplus:
            counts["n_surplus"] += 1
        elif broken:
            counts["n_broken"] += 1
        else:
            counts["n_annotations"] += 1
            counts["n_unsure"] += int(bool(unsure))
    return counts


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
    ``ci95`` (its 95 % Wilson interval over the n shared items, with ``interval``,
    ``interval_name`` and ``approximate``: ``share_interval``; ``bootstrap`` and ``seed`` are
    not used, a share is never bootstrapped), ``cohen_kappa`` and ``n`` (shared items). Without ``raters`` only pairs with at least
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
    check_bootstrap(bootstrap)
    result: dict[str, dict[str, Any]] = {}
    for (a, b), shared in sorted(pairs.items()):
        key = pair_key(a, b)
        if key in result:
            raise ValueError(f"rater names {a!r} and {b!r} give a pair key {key!r} that is already used")
        left = [x for x, _ in shared]
        right = [y for _, y in shared]
        equal = sum(1 for x, y in shared if x == y)
        result[key] = {
            "raters": [a, b],
            "agreement": rate(equal, len(shared)),
            **share_interval(equal, len(shared)),
            "cohen_kappa": cohen_kappa(left, right),
            "n": len(shared),
        }
    return result


# --------------------------------------------------------------------------- the report


def _alpha_section(rows: Sequence[AnnotationRow], bootstrap: int, seed: int) -> dict[str, Any]:
    """The report's alpha keys from checked rows (``check_rows``): ``alpha``, ``alpha_ci95``
    (BCa bootstrap over the pairable items), ``alpha_ci95_not_estimable``, ``alpha_interval``
    (per kind, the method, n and approximate flag), ``alpha_details``, ``alpha_undefined``
    and ``alpha_small_sample``. A zero-width interval (every resample gave the same alpha) is
    null, with the sentence saying so in ``alpha_ci95_not_estimable``."""
    # One stream of resamples for the three kinds, so their intervals are paired.
    by_kind = alpha_by_kind(rows, bootstrap=bootstrap, rng=np.random.default_rng(seed_sequence(seed, "alpha")))
    alpha = {kind: value for kind, (value, _, _) in by_kind.items()}
    alpha_details = {kind: details for kind, (_, _, details) in by_kind.items()}
    not_estimable = {kind: details.pop("ci95_not_estimable") for kind, details in alpha_details.items()}
    methods = {kind: details.pop("interval_method") for kind, details in alpha_details.items()}
    alpha_ci95 = {kind: interval for kind, (_, interval, _) in by_kind.items()}
    return {
        "alpha": alpha,
        "alpha_ci95": alpha_ci95,
        "alpha_ci95_not_estimable": not_estimable,
        "alpha_interval": {kind: interval_fields(methods[kind], alpha_details[kind]["n_units"]) for kind in alpha},
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


def _judges_section(
    majority: HumanMajority, by_judge: Mapping[str, Mapping[str, bool]], bootstrap: int, seed: int
) -> dict[str, dict[str, Any]]:
    """The report's ``judges``: each judge against the human majority (``judge_agreement``,
    kappa's resamples seeded by the judge's name) with its ``small_sample`` note."""
    judges = {
        judge: judge_agreement(majority, labels, bootstrap=bootstrap, seed=seed_sequence(seed, "judge", judge))
        for judge, labels in by_judge.items()
    }
    for result in judges.values():
        result["small_sample"] = sample_size_note(result["n"], result["ci95"]) if result["n"] else None
    return judges


def _labels_by_judged_item(by_judge: Mapping[str, Mapping[str, bool]]) -> dict[str, dict[str, bool]]:
    """{judge: {item: label}} turned round to {item: {judge: label}}, for the judge pairs."""
    judge_items: dict[str, dict[str, bool]] = defaultdict(dict)
    for judge, labels in by_judge.items():
        for item, label in labels.items():
            judge_items[item][judge] = label
    return judge_items


def _calibration_section(
    by_judge: Mapping[str, Mapping[str, bool]],
    human: Mapping[str, bool],
    strata: Mapping[str, str],
    sources: list[str],
    *,
    bootstrap: int,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """The report's ``calibration``: per judge, Rogan-Gladen and stratified PPI++ side by side
    (``calibration_summary``), the human label of an item taken from ``human`` (the majority or
    the labels given instead) and its stratum from ``strata`` (its topic; "" when unknown)."""
    calibration = {}
    for judge, labels in by_judge.items():
        labelled = sorted(item for item in labels if item in human)
        rogan = calibrated_score(
            [labels[item] for item in labelled],
            [human[item] for item in labelled],
            list(labels.values()),
            bootstrap=bootstrap,
            seed=seed_sequence(seed, "calibration", judge),
        )
        ppi = ppi_score(
            [(strata.get(item, ""), labels[item], human[item]) for item in labelled],
            [(strata.get(item, ""), label) for item, label in labels.items()],
        )
        calibration[judge] = calibration_summary(rogan, ppi, source_studies=sources)
    return calibration


def agreement_report(
    annotations: Iterable[AnnotationRow],
    judgments: Iterable[JudgmentRow],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    min_annotations: int = C.MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT,
    item_strata: Mapping[str, str] | None = None,
    source: str | None = None,
    human_labels: Mapping[str, bool] | None = None,
    human_source: str = "majority",
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
    ``annotator_pairs``, ``calibration`` (per judge, Rogan-Gladen and stratified PPI++ side by
    side: ``calibration_summary``; ``item_strata`` maps an item to its topic for PPI++'s
    strata, ``source`` names the study the labels come from; the human label of an item is its
    human majority unless ``human_labels`` gives others, such as adjudicated gold labels, named
    by ``human_source`` and stated as ``calibration_human_source``), ``bootstrap`` and
    ``denominators`` (the text of every denominator and tie rule).

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
    annotation_list = list(annotations)
    rows, _ = check_rows(annotation_list)
    judgment_list = list(judgments)
    by_judge = judgment_labels(judgment_list)
    by_item = labels_by_item(rows)
    majority = majority_of_items(by_item, min_annotations)
    human = majority.decided() if human_labels is None else dict(human_labels)

    alphas = _alpha_section(rows, bootstrap, seed)
    judges = _judges_section(majority, by_judge, bootstrap, seed)
    calibration = _calibration_section(
        by_judge, human, item_strata or {}, [source] if source else [], bootstrap=bootstrap, seed=seed
    )
    return {
        "n_items": len(by_item),
        "n_annotators": len({row.annotator for row in rows}),
        **annotation_counts((row.excluded, row.surplus, row.broken, row.unsure) for row in annotation_list),
        "n_judgments": len(judgment_list),
        **alphas,
        "human_majority": majority.summary(),
        "leave_one_out": leave_one_out_agreement(rows, min_annotations=min_annotations, bootstrap=bootstrap, seed=seed),
        "annotator_pairs": pairwise_agreement(by_item, bootstrap=bootstrap, seed=seed),
        "judges": judges,
        "judge_pairs": pairwise_agreement(
            _labels_by_judged_item(by_judge), raters=by_judge, bootstrap=bootstrap, seed=seed
        ),
        "calibration": calibration,
        "calibration_human_source": human_source,
        "bootstrap": {"resamples": bootstrap, "seed": seed, **BOOTSTRAP_METHOD},
        "denominators": DENOMINATORS,
    }
