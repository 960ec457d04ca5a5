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


DENOMINATORS: dict[str, str] = {
    "n_items": "distinct item_id values with at least one counted annotation (not excluded, not surplus, not "
    "flagged broken)",
    "n_annotators": "distinct annotators with at least one counted annotation",
    "n_annotations": (
        "counted annotation rows; rows with excluded=true are counted in n_excluded, rows with surplus=true "
        "(a late submit into an item that already had its k counted annotations) in n_surplus, and both are "
        "used nowhere (a row that is both is counted once, in n_excluded); rows the annotator flagged "
        "'This item is broken' (no label) in n_broken, used nowhere either; n_unsure counts the counted rows "
        "flagged 'I'm unsure', which stay in every statistic; an annotation a researcher rejected in review is "
        "excluded (n_excluded) and one corrected in review counts with the correction; the study page's pilot "
        "rounds and the rounds API give the same counts (annotation_counts)"
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
        "95% BCa bootstrap (Efron 1987) resampling the pairable items with replacement (the same resamples for the "
        "three kinds), the acceleration from the jackknife over those items (up to 2,000 of them; bias-corrected "
        "percentile above); resamples where alpha is undefined are left out and counted in "
        "alpha_details.n_bootstrap_undefined; null when every resample gives the same alpha (a zero-width interval, "
        "see alpha_ci95_not_estimable); at perfect agreement (every pairable item agrees) the Wilson bound of the "
        "disagreement share mapped through 1 - D_o / D_e instead; alpha_interval names the method and marks it "
        "approximate below 100 items"
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
        "than min_annotations (n_others_too_few) or nobody else labelled it (n_no_others) are left out; ci95 is the "
        "95% Wilson score interval over the n items (interval, interval_name, approximate)"
    ),
    "judges": (
        "agreement = matches / n, n = items with a human majority and a label from this judge; "
        "agreement_has_failure and agreement_no_failure divide by n_has_failure and n_no_failure (the human "
        "majority class); judged items with a human tie (n_human_tie), with fewer than min_annotations "
        "annotations (n_too_few_annotations) or without annotations (n_no_human_labels) are left out, so "
        "n_judged = n + n_human_tie + n_too_few_annotations + n_no_human_labels; ci95 is the 95% Wilson score "
        "interval of agreement over the n items, ci95_has_failure and ci95_no_failure over the items of that class "
        "(a share is never bootstrapped); cohen_kappa_ci95 is a 95% BCa bootstrap over the n items "
        "(cohen_kappa_interval names it; null with the reason in cohen_kappa_ci95_not_estimable when every "
        "resample gives the same kappa); confusion rows are the human majority, columns the judge"
    ),
    "judge_pairs": (
        "agreement = equal labels / n, n = items both judges labelled (annotations not needed); every pair of "
        "judges, keys 'A|B' with the names sorted; ci95 is the 95% Wilson score interval over the n items"
    ),
    "annotator_pairs": (
        "agreement = equal labels / n, n = items both annotators labelled (counted labels); only pairs with n > 0; "
        "ci95 is the 95% Wilson score interval over the n items"
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
        "no_failure fraction over all n_target (= n_unlabelled) items it judged; null when tpr + tnr - 1 <= 0 or a "
        "class is missing; only items with a human majority (see human_majority) give tpr and tnr (n_labelled); ci95 "
        "is the central 95% interval of the Jeffreys posteriors of tpr, tnr and the observed score restricted to "
        "tpr + tnr > 1 and a corrected score in [0, 1] (weighted Monte Carlo, `draws` draws, ci95_mc_se its Monte "
        "Carlo error), never clipped. ppi_score / ppi_ci95 (details in ppi): stratified PPI++ of the human "
        "no_failure share of the judged items from the n_labelled items with a human majority (Y) and the judge's "
        "labels on all n_unlabelled judged items (f), strata = item topics (ppi.strata, merged strata in "
        "ppi.pooled_because), Student-t 95% interval (ppi.df degrees of freedom) with an Agresti-Coull variance floor. Every score and interval "
        "is on 0-1 with a _percent sibling on 0-100"
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
    strata = item_strata or {}
    sources = [source] if source else []
    human = decided if human_labels is None else dict(human_labels)
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
        "judge_pairs": pairwise_agreement(judge_items, raters=by_judge, bootstrap=bootstrap, seed=seed),
        "calibration": calibration,
        "calibration_human_source": human_source,
        "bootstrap": {
            "resamples": bootstrap,
            "seed": seed,
            "interval": (
                "95% BCa (Efron 1987) for the statistics without a closed form (alpha, Cohen's kappa); shares and "
                "rates (agreement, per class, leave-one-out, pairs) carry the 95% Wilson score interval (Wilson "
                "1927) whatever the resamples; every interval names its method (interval, interval_name)"
            ),
            "resampling": "items with replacement (calibration draws from posteriors instead: see denominators.calibration)",
        },
        "denominators": DENOMINATORS,
    }
