"""An independent recomputation of every published figure on new planted data.

Plants a world through the product's own importers and services, the way a user would
(procedures, generation runs and judgment files imported with ``procedure_import``,
``generations_import`` and ``judgments_import``; a critical-failure study created from judged
generations with ``study_create`` and labelled by annotators through ``assignment_next`` and
``annotation_submit``), then reads every figure through the JSON API with Django's test
client as a logged-in researcher and recomputes each one from the planted raw data with code
of its own (no product function is called for a number).

The planted world (seeded; ``--procedures`` sets its size):

* 7 models: ``m-pass`` (never fails), ``m-fail`` (always fails), ``m-tie-a`` and ``m-tie-b``
  (the same number of passes on different procedures: a tie), ``m-good``, ``m-mid``, ``m-low``
  (Bernoulli 0.8, 0.6, 0.35);
* 3 judges: ``judge-a`` (the truth), ``judge-b`` (the truth, each label flipped with
  probability 0.15), ``judge-flaky`` (the truth, but one unreadable answer on one of
  ``m-good``'s procedures and no judgment at all on a fifth of ``m-low``'s, so its coverage is
  below 1 and ``m-low`` is incomplete);
* a study of about 30 of judge-a's judged generations, k = 3: ``h-1`` labels every item (the
  truth, one in eight flipped), ``h-2`` two thirds (the truth), ``h-no`` (always no_failure)
  the first ten items served to them; ``h-late`` reserves an item, lets its lease run out and
  submits after it was filled (a surplus annotation). Some items end with one annotation.

Figures checked: the leaderboard of each judge (both bases) and its pairwise list, the
compare endpoint for every pair, the cross-judge endpoint, the agreement API with its
calibration block, the leaderboard's calibrated column, the rounds API and the metric
agreement API. Closed-form figures (How2Score, coverage, Wilson bounds, exact McNemar p,
Holm, Newcombe's paired interval, Cohen's kappa, Krippendorff's alpha, Rogan-Gladen's point,
PPI++'s point, standard error and interval, AUC, Kendall's tau, counts) match to rounding; a bootstrap or Monte
Carlo interval must hold its point, have the right n and never be zero-width unless it is
reported as not estimable with a reason.

    .venv/bin/python bench/recompute_figures.py [--seed 0] [--procedures 40]

Prints figures checked, mismatches (field, API value, recomputed value) and zero-width
intervals; exits 1 on any mismatch or zero-width interval."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

TOLERANCE = 1e-6
Z = 1.959963984540054
MODELS = ("m-pass", "m-fail", "m-tie-a", "m-tie-b", "m-good", "m-mid", "m-low")
JUDGES = ("judge-a", "judge-b", "judge-flaky")
TOPICS = ("Food & Dining", "Home & Hobbies", "Health")
ANNOTATORS_PER_ITEM = 3
STUDY_ITEMS = 30
FAILURE = [{"failure": "Skips a step the goal needs.", "L1_steps": [2], "L2_steps": [1]}]


# --------------------------------------------------------------------------- planting


@dataclass
class Planted:
    """The raw data as planted: what every figure is recomputed from."""

    procedures: list[str]  # source_example_ids
    topic: dict[str, str]  # source_example_id -> topic name
    truth: dict[tuple[str, str], bool]  # (model, procedure) -> has_failure
    labels: dict[str, dict[tuple[str, str], bool | None]]  # judge -> (model, procedure) -> label (None: unusable)
    study_slug: str = ""
    items: dict[str, tuple[str, str]] = field(default_factory=dict)  # study item id -> (model, procedure)
    # (item id, annotator, has_failure, surplus) in the order submitted
    annotations: list[tuple[str, str, bool, bool]] = field(default_factory=list)


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _truths(rng: random.Random, procedures: list[str]) -> dict[tuple[str, str], bool]:
    n = len(procedures)
    truth: dict[tuple[str, str], bool] = {}
    tie_passes = n // 2
    tie_a = set(rng.sample(procedures, tie_passes))
    tie_b = set(rng.sample(procedures, tie_passes))
    for p in procedures:
        truth[("m-pass", p)] = False
        truth[("m-fail", p)] = True
        truth[("m-tie-a", p)] = p not in tie_a
        truth[("m-tie-b", p)] = p not in tie_b
        for model, share in (("m-good", 0.8), ("m-mid", 0.6), ("m-low", 0.35)):
            truth[(model, p)] = rng.random() >= share
    return truth


def _judge_labels(
    rng: random.Random, procedures: list[str], truth: dict[tuple[str, str], bool]
) -> dict[str, dict[tuple[str, str], bool | None]]:
    labels: dict[str, dict[tuple[str, str], bool | None]] = {judge: {} for judge in JUDGES}
    missing = set(rng.sample(procedures, max(2, len(procedures) // 5)))  # judge-flaky never answered these
    unreadable = rng.choice(procedures)
    for (model, p), t in sorted(truth.items()):
        labels["judge-a"][(model, p)] = t
        labels["judge-b"][(model, p)] = (not t) if rng.random() < 0.15 else t
        if model == "m-low" and p in missing:
            continue
        labels["judge-flaky"][(model, p)] = None if (model == "m-good" and p == unreadable) else t
    return labels


def plant(*, seed: int, n_procedures: int, workdir: Path) -> Planted:
    """Plant the world through the product's importers and services; returns what was planted."""
    from django.utils import timezone

    from annotate.models import Assignment
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.studies.item_sources import items_from_judgments
    from annotate.studies.services import study_create
    from annotate.studies.settings import StudySettings
    from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, read_everything
    from judging.judgment_import import judgments_import
    from judging.transfer import generations_import
    from mining.procedure_services import procedure_import, topics_ensure

    rng = random.Random(seed)
    tag = f"rc{seed}"
    procedures = [f"{tag}-p{i}" for i in range(n_procedures)]
    topic = {p: TOPICS[i % len(TOPICS)] for i, p in enumerate(procedures)}
    truth = _truths(rng, procedures)
    labels = _judge_labels(rng, procedures, truth)

    topics_ensure()
    procedure_import(
        path=_write(
            workdir / "procedures.jsonl",
            [
                {
                    "source_example_id": p,
                    "topic": topic[p],
                    "goal": f"Finish household task number {i} ({tag}).",
                    "resources": ["a towel", "water"],
                    "steps": [f"Step {s} of task {i}: do part {s}." for s in range(1, 6 + i % 4)],
                }
                for i, p in enumerate(procedures)
            ],
        )
    )
    for model in MODELS:
        generations_import(
            path=_write(
                workdir / f"{model}.jsonl",
                [
                    {
                        "source_example_id": p,
                        "model": model,
                        "predicted_steps": [
                            f"{model} does part {s} of {p}." for s in range(1, 5 + (i + len(model)) % 5)
                        ],
                    }
                    for i, p in enumerate(procedures)
                ],
            ),
            run_name=f"{tag}-{model}",
        )
    records = []
    for judge in JUDGES:
        for (model, p), label in sorted(labels[judge].items()):
            record: dict[str, Any] = {"source_example_id": p, "model": model, "judge": judge}
            if label is None:
                record.update(parse_failed=True, has_failure=True, critical_failures=[])
            else:
                record.update(has_failure=label, critical_failures=FAILURE if label else [])
            records.append(record)
    judgments_import(path=_write(workdir / "judgments.jsonl", records))

    planted = Planted(procedures=procedures, topic=topic, truth=truth, labels=labels)
    study = study_create(
        name=f"Recompute {tag}",
        items=items_from_judgments(judge="judge-a", n=STUDY_ITEMS, seed=seed),
        settings=StudySettings(
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            annotators_per_item=ANNOTATORS_PER_ITEM,
            allow_other_pids=True,
        ),
    )
    planted.study_slug = study.slug
    for item in study.items.all():
        planted.items[item.item_id] = (item.source["model"], item.source["source_example_id"])
    counted: Counter[str] = Counter()

    def submit(participation, assignment, pid: str, label: bool) -> None:
        item_id = assignment.item.item_id
        surplus = counted[item_id] >= ANNOTATORS_PER_ITEM
        read_everything(participation, assignment)
        annotation_submit(
            participation=participation,
            public_id=assignment.public_id,
            answer=ONE_FAILURE if label else NO_FAILURE,
            submission_id=f"{pid}-{item_id}",
        )
        if not surplus:
            counted[item_id] += 1
        planted.annotations.append((item_id, pid, label, surplus))

    late = annotator_start(study, "h-late")
    held = assignment_next(participation=late)
    read_everything(late, held)
    Assignment.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    n_items = len(planted.items)
    for pid, how_many, label_of in (
        ("h-1", n_items, lambda k, t: (not t) if k % 8 == 3 else t),
        ("h-2", (2 * n_items) // 3, lambda k, t: t),
        ("h-no", 10, lambda k, t: False),
    ):
        participation = annotator_start(study, pid)
        for k in range(how_many):
            assignment = assignment_next(participation=participation)
            if assignment is None:
                break
            model, p = planted.items[assignment.item.item_id]
            submit(participation, assignment, pid, label_of(k, truth[(model, p)]))
    # The late annotator submits the item it held; it is surplus if the item was filled meanwhile.
    model, p = planted.items[held.item.item_id]
    submit(late, held, "h-late", not truth[(model, p)])
    return planted


# --------------------------------------------------------------------------- statistics, written out


def wilson(successes: int, n: int) -> list[float] | None:
    """Wilson's score interval (Wilson 1927), z = 1.96."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar: 2 P(X <= min(b, c)), X ~ Bin(b + c, 1/2), at most 1."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def holm(p_values: list[float]) -> list[float]:
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for position, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - position) * p_values[i]))
        adjusted[i] = running
    return adjusted


def newcombe(both: int, a_only: int, b_only: int, neither: int) -> list[float] | None:
    """Newcombe (1998) method 10: the Wilson limits of both shares combined with the phi
    coefficient of the 2x2 table, whose numerator AD - BC is reduced by N/2 (not below 0) when
    positive, and phi = 0 when a margin is empty."""
    n = both + a_only + b_only + neither
    if n == 0:
        return None
    p1, p2 = (both + a_only) / n, (both + b_only) / n
    l1, u1 = wilson(both + a_only, n) or [0.0, 1.0]
    l2, u2 = wilson(both + b_only, n) or [0.0, 1.0]
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    cross = both * neither - a_only * b_only
    if cross > 0:
        cross = max(cross - n / 2, 0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return [max(-1.0, p1 - p2 - delta), min(1.0, p1 - p2 + epsilon)]


def kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of two raters' binary labels; None when chance agreement is 1."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    share_a = sum(a for a, _ in pairs) / n
    share_b = sum(b for _, b in pairs) / n
    chance = share_a * share_b + (1 - share_a) * (1 - share_b)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def alpha_nominal(units: dict[str, list[Any]]) -> float | None:
    """Krippendorff's alpha (nominal) with the krippendorff package, annotators as rows."""
    import krippendorff
    import numpy as np

    pairable = {u: v for u, v in units.items() if len(v) >= 2}
    values = sorted({str(x) for v in pairable.values() for x in v})
    if len(values) < 2:
        return None
    width = max(len(v) for v in pairable.values())
    matrix = np.full((width, len(pairable)), np.nan)
    for column, unit_values in enumerate(pairable.values()):
        for row, value in enumerate(unit_values):
            matrix[row, column] = values.index(str(value))
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))


def auc(positives: list[float], negatives: list[float]) -> float | None:
    """P(a has_failure item's value > a no_failure item's), ties 1/2."""
    if not positives or not negatives:
        return None
    wins = sum((p > q) + 0.5 * (p == q) for p in positives for q in negatives)
    return wins / (len(positives) * len(negatives))


def kendall(x: list[float], y: list[float]) -> float | None:
    """Kendall's tau-b (scipy); None when undefined."""
    from scipy.stats import kendalltau

    if len(x) < 2:
        return None
    tau = kendalltau(x, y).statistic
    return None if math.isnan(tau) else float(tau)


def spearman(x: list[float], y: list[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(x) < 2:
        return None
    rho = spearmanr(x, y).statistic
    return None if math.isnan(rho) else float(rho)


def rogan_gladen(observed: float, tpr: float, tnr: float) -> float | None:
    if tpr + tnr - 1 <= 0:
        return None
    return min(1.0, max(0.0, (observed + tnr - 1) / (tpr + tnr - 1)))


def ppi_stratum(labelled: list[tuple[float, float]], unlabelled: list[float]) -> tuple[float, float, float]:
    """One stratum of PPI++ for a mean (Angelopoulos et al. 2023), from (Y, f) pairs and the
    target's f: the tuned lambda = Cov_n(Y, f) / ((1 + n/N) Var(f)), Var(f) over the labelled
    and target predictions together, both sample moments (n - 1; ppi_py divides the
    covariance by n instead, a different but equally valid tuning), clipped to [0, 1];
    theta = lambda mean_N(f) + mean_n(Y - lambda f); its variance lambda^2 Var_N(f) / N +
    Var_n(Y - lambda f) / n, with Var_n(Y) at least the Agresti-Coull share's p(1 - p).
    Returns (theta, lambda, variance)."""
    import numpy as np

    y = np.array([a for a, _ in labelled], dtype=float)
    f = np.array([b for _, b in labelled], dtype=float)
    g = np.array(unlabelled, dtype=float)
    n, big_n = len(y), len(g)
    var_f_all = float(np.var(np.concatenate([f, g]), ddof=1))
    covariance = float(np.sum((y - y.mean()) * (f - f.mean()))) / (n - 1)
    lam = 0.0 if var_f_all == 0 else min(1.0, max(0.0, covariance / ((1 + n / big_n) * var_f_all)))
    theta = lam * float(g.mean()) + float(np.mean(y - lam * f))
    share = (float(y.sum()) + 2) / (n + 4)
    var_y = max(float(np.var(y, ddof=1)), share * (1 - share))
    var_rectifier = max(0.0, var_y - 2 * lam * covariance + lam * lam * float(np.var(f, ddof=1)))
    var_g = float(np.var(g, ddof=1)) if big_n >= 2 else 0.0
    return theta, lam, lam * lam * var_g / big_n + var_rectifier / n


# --------------------------------------------------------------------------- comparing


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Recomputation:
    checked: int = 0
    mismatches: list[tuple[str, Any, Any]] = field(default_factory=list)
    zero_width: list[tuple[str, Any]] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)

    def eq(self, where: str, api: Any, expected: Any) -> None:
        """One figure: the API's value against the recomputed one (numbers to TOLERANCE,
        lists element by element)."""
        self.checked += 1
        if not _same(api, expected):
            self.mismatches.append((where, api, expected))

    def interval(self, where: str, ci: Any, point: Any, reason: Any = None, *, exact: Any = None) -> None:
        """An interval: equal to ``exact`` when recomputable; otherwise it must hold the point
        and have width; a missing interval needs a reason (or an undefined point)."""
        if exact is not None or (ci is None and point is None):
            self.eq(where, ci, exact)
        elif ci is None:
            self.checked += 1
            if not (isinstance(reason, str) and reason.strip()):
                self.mismatches.append((where, None, "an interval, or a reason why it is not estimable"))
            return
        else:
            self.checked += 1
            if not (isinstance(ci, list) and len(ci) == 2 and ci[0] - TOLERANCE <= point <= ci[1] + TOLERANCE):
                self.mismatches.append((where, ci, f"an interval holding the point {point}"))
        if isinstance(ci, list) and len(ci) == 2 and _number(ci[0]) and _number(ci[1]):
            self.checked += 1
            if ci[1] - ci[0] <= 1e-12:
                self.zero_width.append((where, ci))

    def summary(self) -> str:
        lines = [f"figures checked: {self.checked}", f"mismatches: {len(self.mismatches)}"]
        lines += [f"  {where}: API {api!r}, recomputed {expected!r}" for where, api, expected in self.mismatches]
        lines.append(f"zero-width intervals: {len(self.zero_width)}")
        lines += [f"  {where}: {ci!r}" for where, ci in self.zero_width]
        return "\n".join(lines)


def _same(api: Any, expected: Any) -> bool:
    if _number(api) and _number(expected):
        return math.isclose(api, expected, rel_tol=0, abs_tol=TOLERANCE)
    if isinstance(api, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(api) == len(expected) and all(_same(a, b) for a, b in zip(api, expected))
    return api == expected


def _percent(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [100 * v for v in value]
    return 100 * value


def _get(client, url: str, answers: dict[str, Any]) -> Any:
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code} {response.content[:300]!r}")
    answers[url] = response.json()
    return answers[url]


# --------------------------------------------------------------------------- the figures


def _estimate(labels: dict[tuple[str, str], bool | None], model: str, items: list[str]) -> dict[str, Any]:
    """How2Score of ``model`` over ``items`` (its usable verdicts there), with coverage over ``items``."""
    usable = [labels[(model, p)] for p in items if labels.get((model, p)) is not None]
    passed = sum(1 for label in usable if not label)
    return {
        "how2score": passed / len(usable) if usable else None,
        "ci95": wilson(passed, len(usable)),
        "n_judged": len(usable),
        "n_unusable": sum(1 for p in items if (model, p) in labels and labels[(model, p)] is None),
        "n_items": len(items),
        "n_items_judged": len(usable),
        "coverage": len(usable) / len(items) if items else None,
    }


def _check_estimate(r: Recomputation, where: str, api: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if key == "ci95":
            r.interval(f"{where}.ci95", api["ci95"], api["how2score"], exact=value)
            r.eq(f"{where}.ci95_percent", api["ci95_percent"], _percent(value))
        else:
            r.eq(f"{where}.{key}", api[key], value)
    if "how2score" in expected:
        r.eq(f"{where}.how2score_percent", api["how2score_percent"], _percent(expected["how2score"]))


def _competition_ranks(scores: dict[str, Fraction]) -> dict[str, tuple[int, bool]]:
    values = list(scores.values())
    return {m: (1 + sum(1 for v in values if v > s), sum(1 for v in values if v == s) > 1) for m, s in scores.items()}


def _usable(labels: dict[tuple[str, str], bool | None], model: str, procedures: list[str]) -> set[str]:
    return {p for p in procedures if labels.get((model, p)) is not None}


def check_leaderboard(r: Recomputation, client, planted: Planted, judge: str, basis: str) -> None:
    labels = planted.labels[judge]
    procedures = planted.procedures
    board = _get(client, f"/api/leaderboard?judge={judge}&basis={basis}", r.answers)
    at = f"leaderboard[{judge},{basis}]"
    coverage = {m: len(_usable(labels, m, procedures)) / len(procedures) for m in MODELS}
    complete = sorted(m for m in MODELS if coverage[m] >= 0.95)
    common = sorted(set.intersection(*(_usable(labels, m, procedures) for m in complete))) if complete else []
    r.eq(f"{at}.n_items", board["n_items"], len(procedures))
    r.eq(f"{at}.n_common_items", board["n_common_items"], len(common))
    r.eq(f"{at}.n_items_not_common", board["n_items_not_common"], len(procedures) - len(common))
    r.eq(f"{at}.n_complete", board["n_complete"], len(complete))
    scored_items = {m: (common if basis == "common" and m in complete else procedures) for m in MODELS}
    estimates = {m: _estimate(labels, m, scored_items[m]) for m in MODELS}
    fractions = {
        m: Fraction(
            estimates[m]["n_judged"] - sum(1 for p in scored_items[m] if labels.get((m, p))), estimates[m]["n_judged"]
        )
        for m in complete
    }
    ranks = _competition_ranks(fractions)
    intervals = {m: estimates[m]["ci95"] for m in complete}
    order = sorted(complete, key=lambda m: (ranks[m][0], m)) + sorted(
        (m for m in MODELS if m not in complete), key=lambda m: (-coverage[m], m)
    )
    r.eq(f"{at}.order", [row["model"] for row in board["rows"]], order)
    for row in board["rows"]:
        m = row["model"]
        where = f"{at}.{m}"
        own = _estimate(labels, m, procedures)
        _check_estimate(r, f"{where}.all_items", row["all_items"], own)
        if m in complete:
            _check_estimate(r, f"{where}.common_items", row["common_items"], _estimate(labels, m, common))
        scored = estimates[m]
        for key in ("how2score", "ci95", "n_judged"):
            r.eq(f"{where}.{key}", row[key], scored[key])
        r.eq(f"{where}.how2score_percent", row["how2score_percent"], _percent(scored["how2score"]))
        r.eq(f"{where}.ci95_percent", row["ci95_percent"], _percent(scored["ci95"]))
        for key in ("n_unusable", "n_items", "n_items_judged", "coverage"):
            r.eq(f"{where}.{key}", row[key], own[key])
        r.eq(f"{where}.complete", row["complete"], m in complete)
        r.eq(f"{where}.scored_on", row["scored_on"], "common" if basis == "common" and m in complete else "own")
        if m in complete:
            r.eq(f"{where}.rank", row["rank"], ranks[m][0])
            r.eq(f"{where}.tied", row["tied"], ranks[m][1])
            low, high = intervals[m]
            others = [intervals[o] for o in complete if o != m]
            best = 1 + sum(1 for o in others if o[0] > high)
            worst = 1 + sum(1 for o in others if o[1] > low)
            r.eq(f"{where}.rank_interval", row["rank_interval"], [best, worst])
        else:
            r.eq(f"{where}.rank", row["rank"], None)
            r.eq(f"{where}.rank_interval", row["rank_interval"], None)
        for topic in TOPICS:
            items = [p for p in procedures if planted.topic[p] == topic]
            topic_estimate = _estimate(labels, m, items)
            api = row["by_topic"][topic]
            r.eq(f"{where}.by_topic[{topic}].how2score", api["how2score"], topic_estimate["how2score"])
            r.eq(
                f"{where}.by_topic[{topic}].how2score_percent",
                api["how2score_percent"],
                _percent(topic_estimate["how2score"]),
            )
            r.interval(f"{where}.by_topic[{topic}].ci95", api["ci95"], api["how2score"], exact=topic_estimate["ci95"])
            r.eq(f"{where}.by_topic[{topic}].n_judged", api["n_judged"], topic_estimate["n_judged"])
            r.eq(f"{where}.by_topic[{topic}].n_unusable", api["n_unusable"], topic_estimate["n_unusable"])
        # SCORE is over the model's judged generations (a stored judgment, usable or not).
        r.eq(f"{where}.score_n", row["score_n"], sum(1 for p in procedures if (m, p) in labels))
        r.interval(f"{where}.score_ci95", row["score_ci95"], row["score"], row["score_not_estimable"])
        check_leaderboard_calibration(r, f"{where}.calibrated", row["calibrated"], planted, judge, m)
    check_pairwise(r, at, board, labels, procedures)


def _pair_counts(labels, a: str, b: str, procedures: list[str]) -> tuple[list[str], int, int, int, int]:
    common = sorted(_usable(labels, a, procedures) & _usable(labels, b, procedures))
    both = sum(1 for p in common if not labels[(a, p)] and not labels[(b, p)])
    a_only = sum(1 for p in common if not labels[(a, p)] and labels[(b, p)])
    b_only = sum(1 for p in common if labels[(a, p)] and not labels[(b, p)])
    return common, both, a_only, b_only, len(common) - both - a_only - b_only


def _holm_family(labels, procedures: list[str]) -> dict[tuple[str, str], float]:
    pairs = [(a, b) for a, b in itertools.combinations(sorted(MODELS), 2) if _pair_counts(labels, a, b, procedures)[0]]
    p_values = [mcnemar(*_pair_counts(labels, a, b, procedures)[2:4]) for a, b in pairs]
    return dict(zip(pairs, holm(p_values)))


def _decision(p_adjusted: float, difference: float) -> str | None:
    if p_adjusted < 0.05 and difference != 0:
        return "a" if difference > 0 else "b"
    return None


def check_pairwise(r: Recomputation, at: str, board: dict[str, Any], labels, procedures: list[str]) -> None:
    family = _holm_family(labels, procedures)
    r.eq(f"{at}.n_comparisons", board["n_comparisons"], len(family))
    decided = 0
    r.eq(f"{at}.pairwise.count", len(board["pairwise"]), len(family))
    for pair in board["pairwise"]:
        a, b = pair["model_a"], pair["model_b"]
        where = f"{at}.pairwise[{a},{b}]"
        common, both, a_only, b_only, neither = _pair_counts(labels, a, b, procedures)
        difference = (a_only - b_only) / len(common)
        p_adjusted = family[tuple(sorted((a, b)))]  # type: ignore[index]
        decision = _decision(p_adjusted, difference)
        decided += decision is not None
        for key, value in (
            ("n_items", len(common)),
            ("a_only", a_only),
            ("b_only", b_only),
            ("difference", difference),
            ("difference_percent", 100 * difference),
            ("test", "exact McNemar"),
            ("p_value", mcnemar(a_only, b_only)),
            ("p_adjusted", p_adjusted),
            ("n_comparisons", len(family)),
            ("decision", decision),
        ):
            r.eq(f"{where}.{key}", pair[key], value)
    r.eq(f"{at}.n_decided", board["n_decided"], decided)
    adjusted = [pair["p_adjusted"] for pair in board["pairwise"]]
    r.eq(f"{at}.pairwise.order", adjusted, sorted(adjusted))


def check_compare(r: Recomputation, client, planted: Planted, judge: str) -> None:
    labels = planted.labels[judge]
    procedures = planted.procedures
    family = _holm_family(labels, procedures)
    for a, b in family:
        for first, second in ((a, b), (b, a)) if a == "m-good" else ((a, b),):
            answer = _get(client, f"/api/leaderboard/compare?judge={judge}&a={first}&b={second}", r.answers)
            where = f"compare[{judge},{first},{second}]"
            common, both, a_only, b_only, neither = _pair_counts(labels, first, second, procedures)
            difference = (a_only - b_only) / len(common)
            interval = newcombe(both, a_only, b_only, neither)
            _check_estimate(r, f"{where}.a", answer["a"], _estimate(labels, first, common))
            _check_estimate(r, f"{where}.b", answer["b"], _estimate(labels, second, common))
            r.interval(f"{where}.ci95", answer["ci95"], answer["difference"], exact=interval)
            for key, value in (
                ("difference", difference),
                ("difference_percent", 100 * difference),
                ("ci95_percent", _percent(interval)),
                ("interval", "newcombe paired score"),
                ("n_items", len(common)),
                ("both", both),
                ("a_only", a_only),
                ("b_only", b_only),
                ("neither", neither),
                ("n_equal", both + neither),
                ("n_discordant", a_only + b_only),
                ("test", "exact McNemar"),
                ("p_value", mcnemar(a_only, b_only)),
                ("p_adjusted", family[(a, b)]),
                ("n_comparisons", len(family)),
                ("n_models", len(MODELS)),
                ("decision", _decision(family[(a, b)], difference)),
            ):
                r.eq(f"{where}.{key}", answer[key], value)


def check_cross_judge(r: Recomputation, client, planted: Planted) -> None:
    answer = _get(client, "/api/leaderboard/judges/", r.answers)
    procedures = planted.procedures
    at = "cross_judge"
    coverage = {
        (j, m): len(_usable(planted.labels[j], m, procedures)) / len(procedures) for j in JUDGES for m in MODELS
    }
    complete = sorted(m for m in MODELS if all(coverage[(j, m)] >= 0.95 for j in JUDGES))
    incomplete = sorted(set(MODELS) - set(complete))
    common = sorted(set.intersection(*(_usable(planted.labels[j], m, procedures) for j in JUDGES for m in complete)))
    r.eq(f"{at}.judges", answer["judges"], list(JUDGES))
    r.eq(f"{at}.models", answer["models"], sorted(MODELS))
    r.eq(f"{at}.complete_models", answer["complete_models"], complete)
    r.eq(f"{at}.incomplete_models", answer["incomplete_models"], incomplete)
    r.eq(
        f"{at}.left_out",
        answer["left_out"],
        {m: [j for j in JUDGES if coverage[(j, m)] < 0.95] for m in incomplete},
    )
    r.eq(f"{at}.n_items", answer["n_items"], len(procedures))
    r.eq(f"{at}.n_common_items", answer["n_common_items"], len(common))
    r.eq(f"{at}.n_items_not_common", answer["n_items_not_common"], len(procedures) - len(common))
    common_scores: dict[str, dict[str, float]] = {}
    for j in JUDGES:
        labels = planted.labels[j]
        for m in MODELS:
            own = _estimate(labels, m, procedures)
            _check_estimate(r, f"{at}.estimates[{j}][{m}]", answer["estimates"][j][m], own)
            r.eq(f"{at}.scores[{j}][{m}]", answer["scores"][j][m], own["how2score"])
        fractions = {}
        for m in complete:
            estimate = _estimate(labels, m, common)
            _check_estimate(r, f"{at}.common_estimates[{j}][{m}]", answer["common_estimates"][j][m], estimate)
            fractions[m] = Fraction(sum(1 for p in common if not labels[(m, p)]), len(common))
        r.eq(f"{at}.common_estimates[{j}].models", sorted(answer["common_estimates"][j]), complete)
        ranks = _competition_ranks(fractions)
        for m in complete:
            r.eq(f"{at}.ranks[{j}][{m}]", answer["ranks"][j][m], {"rank": ranks[m][0], "tied": ranks[m][1]})
        common_scores[j] = {m: float(fractions[m]) for m in complete}
    for pair in answer["pairs"]:
        j1, j2 = pair["judges"]
        where = f"{at}.pairs[{j1},{j2}]"
        x = [common_scores[j1][m] for m in complete]
        y = [common_scores[j2][m] for m in complete]
        r.eq(f"{where}.n_models", pair["n_models"], len(complete))
        r.eq(f"{where}.n_items", pair["n_items"], len(common))
        r.eq(f"{where}.kendall_tau", pair["kendall_tau"], kendall(x, y))
        r.eq(f"{where}.spearman", pair["spearman"], spearman(x, y))
        r.interval(
            f"{where}.kendall_tau_ci95", pair["kendall_tau_ci95"], pair["kendall_tau"], pair["kendall_tau_reason"]
        )
        r.interval(f"{where}.spearman_ci95", pair["spearman_ci95"], pair["spearman"], pair["spearman_reason"])
    r.eq(f"{at}.pairs.count", len(answer["pairs"]), len(JUDGES) * (len(JUDGES) - 1) // 2)


# --------------------------------------------------------------------------- the study


@dataclass
class Humans:
    """The study's counted annotations and what follows from them."""

    labels: dict[str, dict[str, bool]]  # item -> annotator -> has_failure (counted only)
    majority: dict[str, bool]  # items with a strict majority of at least 2 counted labels
    ties: set[str]
    too_few: set[str]


def humans(planted: Planted) -> Humans:
    labels: dict[str, dict[str, bool]] = defaultdict(dict)
    for item, annotator, label, surplus in planted.annotations:
        if not surplus:
            labels[item][annotator] = label
    majority, ties, too_few = {}, set(), set()
    for item, by in labels.items():
        votes = list(by.values())
        if len(votes) < 2:
            too_few.add(item)
        elif 2 * sum(votes) > len(votes):
            majority[item] = True
        elif 2 * sum(votes) < len(votes):
            majority[item] = False
        else:
            ties.add(item)
    return Humans(dict(labels), majority, ties, too_few)


def _study_judge_labels(planted: Planted, judge: str) -> dict[str, bool]:
    """The judge's usable labels of the study's items."""
    out = {}
    for item, key in planted.items.items():
        label = planted.labels[judge].get(key)
        if label is not None:
            out[item] = label
    return out


def _rates(h: Humans, judged: dict[str, bool]) -> dict[str, Any]:
    """Against the human majority (positive class: no_failure)."""
    both = [i for i in judged if i in h.majority]
    positives = [i for i in both if not h.majority[i]]
    negatives = [i for i in both if h.majority[i]]
    return {
        "both": both,
        "tpr": sum(1 for i in positives if not judged[i]) / len(positives) if positives else None,
        "tnr": sum(1 for i in negatives if judged[i]) / len(negatives) if negatives else None,
        "n_positive": len(positives),
        "n_negative": len(negatives),
    }


def check_agreement(r: Recomputation, client, planted: Planted) -> None:
    slug = planted.study_slug
    report = _get(client, f"/api/studies/{slug}/agreement", r.answers)
    h = humans(planted)
    at = "agreement"
    counted = [a for a in planted.annotations if not a[3]]
    r.eq(f"{at}.n_items", report["n_items"], len(h.labels))
    r.eq(f"{at}.n_annotators", report["n_annotators"], len({a[1] for a in counted}))
    r.eq(f"{at}.n_annotations", report["n_annotations"], len(counted))
    r.eq(f"{at}.n_excluded", report["n_excluded"], 0)
    r.eq(f"{at}.n_surplus", report["n_surplus"], len(planted.annotations) - len(counted))
    judged = {j: _study_judge_labels(planted, j) for j in JUDGES}
    r.eq(f"{at}.n_judgments", report["n_judgments"], sum(len(v) for v in judged.values()))
    # Alpha: every annotation here is NO_FAILURE or ONE_FAILURE linking L2 step 2, so the first
    # failure location is "none" or 2 and the L2 step sets {} or {2}: MASI distance between
    # those two is 1, as nominal, and all three alphas are the binary one.
    units = {item: list(by.values()) for item, by in h.labels.items()}
    alpha = alpha_nominal(units)
    pairable = {u: v for u, v in units.items() if len(v) >= 2}
    for kind in ("binary", "first_failure_location", "l2_step_sets_masi"):
        r.eq(f"{at}.alpha.{kind}", report["alpha"][kind], alpha)
        details = report["alpha_details"][kind]
        r.eq(f"{at}.alpha_details.{kind}.n_units", details["n_units"], len(pairable))
        r.eq(f"{at}.alpha_details.{kind}.n_values", details["n_values"], sum(len(v) for v in pairable.values()))
        r.eq(f"{at}.alpha_details.{kind}.n_single", details["n_single"], len(units) - len(pairable))
        r.interval(
            f"{at}.alpha_ci95.{kind}",
            report["alpha_ci95"][kind],
            report["alpha"][kind],
            report["alpha_ci95_not_estimable"][kind],
        )
    majority_block = {
        "min_annotations": 2,
        "n_items": len(h.labels),
        "n_with_majority": len(h.majority),
        "has_failure": sum(h.majority.values()),
        "no_failure": len(h.majority) - sum(h.majority.values()),
        "n_ties": len(h.ties),
        "n_too_few": len(h.too_few),
    }
    r.eq(f"{at}.human_majority", report["human_majority"], majority_block)
    check_leave_one_out(r, at, report["leave_one_out"], h)
    for j in JUDGES:
        check_judge_block(r, f"{at}.judges[{j}]", report["judges"][j], h, judged[j])
        check_agreement_calibration(r, f"{at}.calibration[{j}]", report["calibration"][j], planted, h, judged[j])
    for j1, j2 in itertools.combinations(sorted(JUDGES), 2):
        shared = sorted(set(judged[j1]) & set(judged[j2]))
        check_pair(
            r,
            f"{at}.judge_pairs[{j1}|{j2}]",
            report["judge_pairs"][f"{j1}|{j2}"],
            [(judged[j1][i], judged[j2][i]) for i in shared],
        )
    annotators = sorted({a[1] for a in counted})
    expected_pairs = {}
    for a1, a2 in itertools.combinations(annotators, 2):
        shared = sorted(i for i, by in h.labels.items() if a1 in by and a2 in by)
        if shared:
            expected_pairs[f"{a1}|{a2}"] = [(h.labels[i][a1], h.labels[i][a2]) for i in shared]
    r.eq(f"{at}.annotator_pairs.keys", sorted(report["annotator_pairs"]), sorted(expected_pairs))
    for key, pairs in expected_pairs.items():
        check_pair(r, f"{at}.annotator_pairs[{key}]", report["annotator_pairs"][key], pairs)
    rounds = _get(client, f"/api/studies/{slug}/rounds/", r.answers)
    r.eq("rounds.count", len(rounds), 1)
    row = rounds[0]
    for key, value in (
        ("n_annotations", len(counted)),
        ("n_excluded", 0),
        ("n_surplus", len(planted.annotations) - len(counted)),
        ("alpha", alpha),
        ("alpha_n", len(pairable)),
    ):
        r.eq(f"rounds[0].{key}", row[key], value)
    r.interval("rounds[0].alpha_ci95", row["alpha_ci95"], row["alpha"], row["alpha_ci95_not_estimable"])
    r.eq("rounds[0].alpha_ci95 = agreement's", row["alpha_ci95"], report["alpha_ci95"]["binary"])


def check_pair(r: Recomputation, where: str, api: dict[str, Any], pairs: list[tuple[bool, bool]]) -> None:
    agree = sum(a == b for a, b in pairs)
    r.eq(f"{where}.n", api["n"], len(pairs))
    r.eq(f"{where}.agreement", api["agreement"], agree / len(pairs) if pairs else None)
    r.interval(f"{where}.ci95", api["ci95"], api["agreement"], exact=wilson(agree, len(pairs)))
    r.eq(f"{where}.cohen_kappa", api["cohen_kappa"], kappa(pairs))


def check_leave_one_out(r: Recomputation, at: str, api: dict[str, Any], h: Humans) -> None:
    annotators = sorted({a for by in h.labels.values() for a in by})
    r.eq(f"{at}.leave_one_out.annotators", sorted(api), annotators)
    for annotator in annotators:
        counts = Counter()
        matches = 0
        for by in h.labels.values():
            if annotator not in by:
                continue
            counts["n_items"] += 1
            others = [v for a, v in by.items() if a != annotator]
            if not others:
                counts["n_no_others"] += 1
            elif len(others) < 2:
                counts["n_others_too_few"] += 1
            elif 2 * sum(others) == len(others):
                counts["n_others_tie"] += 1
            else:
                counts["n"] += 1
                matches += by[annotator] == (2 * sum(others) > len(others))
        where = f"{at}.leave_one_out[{annotator}]"
        row = api[annotator]
        for key in ("n", "n_items", "n_others_tie", "n_others_too_few", "n_no_others"):
            r.eq(f"{where}.{key}", row[key], counts[key])
        r.eq(f"{where}.agreement", row["agreement"], matches / counts["n"] if counts["n"] else None)
        r.interval(f"{where}.ci95", row["ci95"], row["agreement"], exact=wilson(matches, counts["n"]))


def check_judge_block(r: Recomputation, where: str, api: dict[str, Any], h: Humans, judged: dict[str, bool]) -> None:
    both = [i for i in judged if i in h.majority]
    pairs = [(judged[i], h.majority[i]) for i in both]
    positives = [i for i in both if h.majority[i]]  # human has_failure
    negatives = [i for i in both if not h.majority[i]]
    agree = sum(a == b for a, b in pairs)
    agree_hf = sum(1 for i in positives if judged[i])
    agree_nf = sum(1 for i in negatives if not judged[i])
    for key, value in (
        ("n", len(both)),
        ("agreement", agree / len(both) if both else None),
        ("n_has_failure", len(positives)),
        ("n_no_failure", len(negatives)),
        ("agreement_has_failure", agree_hf / len(positives) if positives else None),
        ("agreement_no_failure", agree_nf / len(negatives) if negatives else None),
        ("cohen_kappa", kappa(pairs)),
        ("n_judged", len(judged)),
        ("n_human_tie", sum(1 for i in judged if i in h.ties)),
        ("n_too_few_annotations", sum(1 for i in judged if i in h.too_few)),
        ("n_no_human_labels", sum(1 for i in judged if i not in h.labels)),
        (
            "confusion",
            {
                "human_has_failure": {"judge_has_failure": agree_hf, "judge_no_failure": len(positives) - agree_hf},
                "human_no_failure": {"judge_has_failure": len(negatives) - agree_nf, "judge_no_failure": agree_nf},
            },
        ),
    ):
        r.eq(f"{where}.{key}", api[key], value)
    r.interval(f"{where}.ci95", api["ci95"], api["agreement"], exact=wilson(agree, len(both)))
    r.interval(
        f"{where}.ci95_has_failure",
        api["ci95_has_failure"],
        api["agreement_has_failure"],
        exact=wilson(agree_hf, len(positives)),
    )
    r.interval(
        f"{where}.ci95_no_failure",
        api["ci95_no_failure"],
        api["agreement_no_failure"],
        exact=wilson(agree_nf, len(negatives)),
    )
    r.interval(
        f"{where}.cohen_kappa_ci95", api["cohen_kappa_ci95"], api["cohen_kappa"], api["cohen_kappa_ci95_not_estimable"]
    )


def _check_rogan_gladen(
    r: Recomputation, where: str, api: dict[str, Any], rates: dict[str, Any], target: list[bool]
) -> None:
    observed = sum(1 for label in target if not label) / len(target) if target else None
    for key in ("tpr", "tnr", "n_positive", "n_negative"):
        r.eq(f"{where}.{key}", api[key], rates[key])
    r.eq(f"{where}.n_labelled", api["n_labelled"], len(rates["both"]))
    r.eq(f"{where}.n_target", api["n_target"], len(target))
    r.eq(f"{where}.observed_score", api["observed_score"], observed)
    corrected = None
    if observed is not None and rates["tpr"] is not None and rates["tnr"] is not None:
        corrected = rogan_gladen(observed, rates["tpr"], rates["tnr"])
    r.eq(f"{where}.corrected_score", api["corrected_score"], corrected)
    r.eq(f"{where}.corrected_score_percent", api["corrected_score_percent"], _percent(corrected))
    r.interval(f"{where}.ci95", api["ci95"], api["corrected_score"], api["ci95_not_estimable"])
    r.eq(f"{where}.ci95_percent", api["ci95_percent"], _percent(api["ci95"]))


def _check_ppi(
    r: Recomputation,
    where: str,
    api: dict[str, Any],
    labelled: list[tuple[str, bool, bool]],
    target: list[tuple[str, bool]],
) -> None:
    """labelled: (topic, judge has_failure, human has_failure); target: (topic, judge has_failure)."""
    from scipy.stats import t as student_t

    r.eq(f"{where}.n_labelled", api["n_labelled"], len(labelled))
    r.eq(f"{where}.n_unlabelled", api["n_unlabelled"], len(target))
    if len(labelled) < 2 or not target:
        r.eq(f"{where}.estimate", api["estimate"], None)
        r.interval(f"{where}.ci95", api["ci95"], api["estimate"], api["not_estimable"])
        return
    by_topic = Counter(topic for topic, *_ in labelled)
    target_topics = Counter(topic for topic, _ in target)
    kept = sorted(
        topic
        for topic in target_topics
        if by_topic[topic] >= 10 and target_topics[topic] and len({hu for tp, _, hu in labelled if tp == topic}) > 1
    )
    merged = [topic for topic in target_topics if topic not in kept]
    if sum(by_topic[topic] for topic in merged) < 10 and merged:
        kept, merged = [], list(target_topics)
    strata = [[topic] for topic in kept] + ([merged] if merged else [])
    parts = []  # (weight, theta, variance) per stratum
    for topics in strata:
        y_f = [(float(not hu), float(not ju)) for tp, ju, hu in labelled if tp in topics]
        f_target = [float(not ju) for tp, ju in target if tp in topics]
        theta_k, _, variance_k = ppi_stratum(y_f, f_target)
        parts.append((len(f_target) / len(target), theta_k, variance_k))
    theta = sum(w * t for w, t, _ in parts)
    # The strata's shares are estimated too: + sum w (theta_k - theta)^2 / N.
    variance = sum(w * w * v for w, _, v in parts) + sum(w * (t - theta) ** 2 for w, t, _ in parts) / len(target)
    r.eq(f"{where}.se", api["se"], math.sqrt(variance))
    estimate = min(1.0, max(0.0, theta))
    r.eq(f"{where}.estimate", api["estimate"], estimate)
    r.eq(f"{where}.estimate_percent", api["estimate_percent"], _percent(estimate))
    r.eq(f"{where}.strata.count", len(api["strata"]), len(strata))
    r.eq(f"{where}.df", api["df"], len(labelled) - len(strata))
    critical = float(student_t.ppf(0.975, len(labelled) - len(strata)))
    r.eq(f"{where}.critical_value", api["critical_value"], critical)
    half = critical * math.sqrt(variance)
    r.interval(
        f"{where}.ci95", api["ci95"], api["estimate"], exact=[max(0.0, estimate - half), min(1.0, estimate + half)]
    )


def check_agreement_calibration(
    r: Recomputation, where: str, api: dict[str, Any], planted: Planted, h: Humans, judged: dict[str, bool]
) -> None:
    """The agreement page's calibration: the target is every study item the judge labelled."""
    rates = _rates(h, judged)
    _check_rogan_gladen(r, where, api, rates, list(judged.values()))
    topic = {item: planted.topic[p] for item, (_, p) in planted.items.items()}
    labelled = [(topic[i], judged[i], h.majority[i]) for i in rates["both"]]
    target = [(topic[i], judged[i]) for i in judged]
    _check_ppi(r, f"{where}.ppi", api["ppi"], labelled, target)
    r.eq(f"{where}.ppi_score", api["ppi_score"], api["ppi"]["estimate"])
    r.eq(f"{where}.ppi_ci95", api["ppi_ci95"], api["ppi"]["ci95"])


def check_leaderboard_calibration(
    r: Recomputation, where: str, api: dict[str, Any] | None, planted: Planted, judge: str, model: str
) -> None:
    """The leaderboard's calibrated column: the judge's rates against the human majority over
    every study item it judged, applied to the model's judged generations (all of the slice);
    PPI++ labelled by the model's own study items only."""
    h = humans(planted)
    judged = _study_judge_labels(planted, judge)
    rates = _rates(h, judged)
    if not rates["both"]:
        r.eq(where, api, None)
        return
    assert api is not None
    labels = planted.labels[judge]
    target_keys = [(model, p) for p in planted.procedures if labels.get((model, p)) is not None]
    _check_rogan_gladen(r, where, api, rates, [labels[k] for k in target_keys])
    own = [i for i in rates["both"] if planted.items[i][0] == model]
    labelled = [(planted.topic[planted.items[i][1]], judged[i], h.majority[i]) for i in own]
    target = [(planted.topic[p], labels[(m, p)]) for m, p in target_keys]
    _check_ppi(r, f"{where}.ppi", api["ppi"], labelled, target)


def check_metric_agreement(r: Recomputation, client, planted: Planted) -> None:
    report = _get(client, f"/api/studies/{planted.study_slug}/metric-agreement", r.answers)
    h = humans(planted)
    at = "metric_agreement"
    r.eq(f"{at}.n_items", report["n_items"], len(h.majority))
    r.eq(f"{at}.n_ties", report["n_ties"], len(h.ties))
    signals = {s["key"]: s for s in report["signals"]}
    for j in JUDGES:
        where = f"{at}.signals[judge:{j}]"
        api = signals[f"judge:{j}"]
        judged = _study_judge_labels(planted, j)
        items = sorted(i for i in h.majority if i in judged)
        positives = [float(judged[i]) for i in items if h.majority[i]]
        negatives = [float(judged[i]) for i in items if not h.majority[i]]
        r.eq(f"{where}.n", api["n"], len(items))
        r.eq(f"{where}.n_has_failure", api["n_has_failure"], len(positives))
        r.eq(f"{where}.n_no_failure", api["n_no_failure"], len(negatives))
        r.eq(f"{where}.n_missing", api["n_missing"], sum(1 for i in h.majority if i not in judged))
        r.eq(f"{where}.n_unlabelled", api["n_unlabelled"], sum(1 for i in judged if i not in h.majority))
        r.eq(f"{where}.auc", api["auc"], auc(positives, negatives))
        # Best threshold: "has_failure when value >= t" for every observed t, or never; fewest flagged on ties.
        rules = [(sum(1 for i in items if h.majority[i] is False), 0)]
        for t in sorted({float(judged[i]) for i in items}):
            flagged = [i for i in items if float(judged[i]) >= t]
            correct = sum(1 for i in items if (i in flagged) == h.majority[i])
            rules.append((correct, len(flagged)))
        best = max(rules, key=lambda rule: (rule[0], -rule[1]))
        r.eq(f"{where}.best_threshold.accuracy", api["best_threshold"]["accuracy"], best[0] / len(items))
        r.eq(f"{where}.best_threshold.n_flagged", api["best_threshold"]["n_flagged"], best[1])
        r.eq(
            f"{where}.best_threshold.baseline_accuracy",
            api["best_threshold"]["baseline_accuracy"],
            max(len(positives), len(negatives)) / len(items),
        )
        per_model: dict[str, list[str]] = defaultdict(list)
        for i in items:
            per_model[planted.items[i][0]].append(i)
        models = sorted(per_model)
        human_rate = [sum(1 for i in per_model[m] if not h.majority[i]) / len(per_model[m]) for m in models]
        signal_mean = [sum(float(judged[i]) for i in per_model[m]) / len(per_model[m]) for m in models]
        r.eq(f"{where}.n_models", api["n_models"], len(models))
        r.eq(f"{where}.kendall_tau", api["kendall_tau"], kendall([-v for v in signal_mean], human_rate))
        for m, rate, mean in zip(models, human_rate, signal_mean):
            r.eq(
                f"{where}.models[{m}]",
                api["models"][m],
                {"n": len(per_model[m]), "human_no_failure": rate, "signal_mean": mean},
            )
    for key, api in signals.items():
        where = f"{at}.signals[{key}]"
        r.eq(f"{where}.n + n_missing", api["n"] + api["n_missing"], len(h.majority))
        r.eq(f"{where}.n_has_failure + n_no_failure", api["n_has_failure"] + api["n_no_failure"], api["n"])
        r.interval(f"{where}.auc_ci95", api["auc_ci95"], api["auc"], api["auc_ci95_not_estimable"])
        threshold = api["best_threshold"]
        if threshold is not None:
            r.interval(
                f"{where}.best_threshold.ci95",
                threshold["ci95"],
                threshold["accuracy"],
                threshold["ci95_not_estimable"],
            )
        r.interval(
            f"{where}.kendall_tau_ci95",
            api["kendall_tau_ci95"],
            api["kendall_tau"],
            api["kendall_tau_ci95_not_estimable"],
        )
    ranked = [s["auc"] for s in report["signals"] if s["auc"] is not None]
    r.eq(f"{at}.signals.order", ranked, sorted(ranked, reverse=True))


def recompute(client, planted: Planted) -> Recomputation:
    """Read every figure through the API and recompute it from ``planted``."""
    r = Recomputation()
    for judge in JUDGES:
        for basis in ("common", "all"):
            check_leaderboard(r, client, planted, judge, basis)
        check_compare(r, client, planted, judge)
    check_cross_judge(r, client, planted)
    check_agreement(r, client, planted)
    check_metric_agreement(r, client, planted)
    return r


# --------------------------------------------------------------------------- running


def researcher_client():
    """A test client logged in as a new researcher."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from core.roles import ROLE_RESEARCHER
    from core.services import user_create

    created = user_create(username="recompute-researcher", role=ROLE_RESEARCHER)
    client = Client()
    client.force_login(get_user_model().objects.get(username=created.username))
    return client


def _setup_throwaway_database() -> None:
    """A fresh SQLite database in a temporary folder, migrated; Django set up on it."""
    var_dir = tempfile.mkdtemp(prefix="recompute-figures-")
    os.environ.update(
        VAR_DIR=var_dir,
        DATABASE_URL=f"sqlite:///{var_dir}/db.sqlite3",
        DJANGO_SETTINGS_MODULE="config.django.base",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="testserver",
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, check=True)
    import django

    django.setup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--procedures", type=int, default=40)
    parser.add_argument("--dump", help="write every API answer read to this JSON file")
    args = parser.parse_args(argv)
    _setup_throwaway_database()
    with tempfile.TemporaryDirectory() as workdir:
        planted = plant(seed=args.seed, n_procedures=args.procedures, workdir=Path(workdir))
    client = researcher_client()
    result = recompute(client, planted)
    if args.dump:
        Path(args.dump).write_text(json.dumps(result.answers, indent=1, default=str))
    print(result.summary())
    return 1 if result.mismatches or result.zero_width else 0


if __name__ == "__main__":
    sys.exit(main())
