"""Krippendorff's alpha over an items x annotators matrix with missing cells, and its
BCa bootstrap interval over items (Efron 1987). Pure Python and NumPy, no Django (How2Everything §4.3).

Three kinds: ``binary`` (nominal over has_failure), ``first_failure_location`` (nominal over
``"none"`` / the smallest linked L2 step / ``"unlocated"``) and ``l2_step_sets_masi`` (each
annotation's set of linked L2 steps, MASI distance). The value domain is put in a total order
first, so no result depends on the order of the input rows. The coincidence computation of
alpha is in ``coincidence.py``, the bootstrap over items in ``alpha_bootstrap.py``."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal, cast

import krippendorff
import numpy as np
import numpy.typing as npt

from annotate.stats.alpha_bootstrap import AlphaInput, alpha_bootstraps
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, SeedLike, check_bootstrap, sample_size_note
from annotate.stats.coincidence import Pairable, V, alpha_from_pairable, nominal_distance_matrix, pairable
from annotate.stats.majority import annotation_l2_steps, check_rows, first_failure_location
from annotate.stats.records import AnnotationRow
from core.intervals import interval_fields

AlphaKind = Literal["binary", "first_failure_location", "l2_step_sets_masi"]
ALPHA_KINDS: tuple[AlphaKind, ...] = ("binary", "first_failure_location", "l2_step_sets_masi")

# The krippendorff package builds dense arrays of (units x values x values) floats. Above
# this many cells the same coincidence computation runs in ``coincidence_alpha`` instead,
# which needs only (values x values) memory; the tests prove the two agree.
PACKAGE_MAX_CELLS = 4_000_000


def masi_distance(a: Iterable[int], b: Iterable[int]) -> float:
    """MASI distance (Passonneau 2006) between two sets: ``1 - J * M`` where J is the
    Jaccard index |A∩B|/|A∪B| and M is 1 when A = B, 2/3 when one is a proper subset of
    the other, 1/3 when they overlap otherwise and 0 when they are disjoint. Two empty
    sets are identical: distance 0."""
    set_a, set_b = frozenset(a), frozenset(b)
    if set_a == set_b:
        return 0.0
    inter = len(set_a & set_b)
    if inter == 0:
        return 1.0
    union = len(set_a | set_b)
    monotonicity = 2 / 3 if (set_a <= set_b or set_b <= set_a) else 1 / 3
    return 1.0 - (inter / union) * monotonicity


def masi_distance_matrix(sets: Sequence[frozenset[int]]) -> npt.NDArray[np.float64]:
    """Pairwise MASI distances between ``sets`` as a (len x len) array, vectorised."""
    steps = sorted({step for s in sets for step in s})
    column = {step: index for index, step in enumerate(steps)}
    member = np.zeros((len(sets), max(len(steps), 1)), dtype=np.float64)
    for row, s in enumerate(sets):
        for step in s:
            member[row, column[step]] = 1.0
    inter = member @ member.T
    size = member.sum(axis=1)
    size_a, size_b = size[:, None], size[None, :]
    union = size_a + size_b - inter
    jaccard = np.divide(inter, union, out=np.ones_like(inter), where=union > 0)
    equal = (inter == size_a) & (inter == size_b)
    subset = inter == np.minimum(size_a, size_b)
    monotonicity = np.where(equal, 1.0, np.where(subset & (inter > 0), 2 / 3, np.where(inter > 0, 1 / 3, 0.0)))
    distance: npt.NDArray[np.float64] = 1.0 - jaccard * monotonicity
    np.fill_diagonal(distance, 0.0)
    return distance


def coincidence_alpha(
    matrix: Sequence[Sequence[V | None]], distance: Callable[[V, V], float] | None = None
) -> float | None:
    """Krippendorff's alpha over an items x coders matrix (``None`` = missing cell),
    computed here from the coincidence definition (see ``alpha_from_pairable``) with any
    distance between values (nominal when ``distance`` is None). Only items with at least
    two values count. ``None`` when no item has two values or when the pairable values
    show no variation (D_e = 0): alpha is undefined there."""
    p = pairable(matrix)
    if distance is None:
        delta = nominal_distance_matrix(len(p.domain))
    else:
        delta = np.array([[distance(a, b) for b in p.domain] for a in p.domain], dtype=np.float64).reshape(
            len(p.domain), len(p.domain)
        )
    return alpha_from_pairable(p, delta)


def _package_alpha(p: Pairable[V], delta: npt.NDArray[np.float64], nominal: bool) -> float | None:
    """The krippendorff package on the same pairable counts (values by index, distances by
    a lookup into ``delta``), or the coincidence computation when the package's dense arrays
    would exceed ``PACKAGE_MAX_CELLS``."""
    if p.n_units == 0 or len(p.domain) < 2:
        return None
    n_c = np.bincount(p.value_of, minlength=len(p.domain)).astype(np.float64)
    if float(n_c @ delta @ n_c) <= 0.0:
        return None
    if p.n_units * len(p.domain) ** 2 > PACKAGE_MAX_CELLS:
        return alpha_from_pairable(p, delta)

    def lookup(v1: Any, v2: Any, i1: Any, i2: Any, n_v: Any, dtype: Any = np.float64) -> Any:
        return delta[i1, i2].astype(dtype)

    metric: Any = "nominal" if nominal else lookup
    value = krippendorff.alpha(
        value_counts=p.counts(), value_domain=np.arange(len(p.domain)), level_of_measurement=metric
    )
    return float(value)


def nominal_alpha(matrix: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Nominal Krippendorff's alpha with the krippendorff package, over an items x coders
    matrix with ``None`` for missing cells. ``None`` when undefined."""
    p = pairable(matrix)
    return _package_alpha(p, nominal_distance_matrix(len(p.domain)), nominal=True)


def _interval(
    matrix: Sequence[Sequence[Hashable | None]],
    bootstrap: int,
    seed: SeedLike,
    distance: Callable[[Any, Any], float] | None = None,
) -> tuple[float | None, list[float] | None, str | None, str, Pairable[Hashable]]:
    """Alpha (nominal when ``distance`` is None), its interval, why the interval is not
    estimable, the interval's method (registry key), the pairable units."""
    check_bootstrap(bootstrap)
    p = pairable(matrix)
    nominal = distance is None
    if distance is None:
        delta = nominal_distance_matrix(len(p.domain))
    else:
        delta = np.array([[distance(a, b) for b in p.domain] for a in p.domain], dtype=np.float64).reshape(
            len(p.domain), len(p.domain)
        )
    alpha = _package_alpha(p, delta, nominal=nominal) if p.n_units else None
    inputs = {"alpha": AlphaInput(p, delta, nominal)}
    interval, _, reason, method = alpha_bootstraps(inputs, bootstrap, np.random.default_rng(seed), {"alpha": alpha})[
        "alpha"
    ]
    return alpha, interval, reason, method, p


def nominal_alpha_interval(
    matrix: Sequence[Sequence[Hashable | None]], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % BCa bootstrap interval of ``nominal_alpha`` over the same matrix (Efron 1987),
    resampling its items (rows with at least two values) with replacement ``bootstrap``
    times, the acceleration from the jackknife over those items; resamples where alpha is
    undefined are left out. ``None`` when alpha is undefined, ``bootstrap`` is 0 or every
    resample gives the same alpha (not estimable: ``nominal_alpha_estimate`` says why)."""
    return _interval(matrix, bootstrap, seed)[1]


def nominal_alpha_estimate(
    matrix: Sequence[Sequence[Hashable | None]], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> dict[str, Any]:
    """Nominal alpha as the pages and the API show it (``alpha_estimate`` without a distance)."""
    return alpha_estimate(matrix, bootstrap=bootstrap, seed=seed)


def alpha_estimate(
    matrix: Sequence[Sequence[Hashable | None]],
    *,
    distance: Callable[[Any, Any], float] | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: SeedLike = 0,
) -> dict[str, Any]:
    """Alpha as the pages and the API show it, in the keys of a critical-failure round, at
    any distance between values (nominal when ``distance`` is None; an ordinal distance for
    a Likert question, annotate/stats/levels.py): ``alpha``, ``alpha_ci95`` (the BCa
    bootstrap over the pairable items, as ``nominal_alpha_interval``; the distance is the
    whole matrix's, held fixed in the resamples; null when alpha is undefined, ``bootstrap``
    is 0 or the interval is not estimable), ``alpha_n`` (the pairable items, rows with two
    or more values), ``alpha_ci95_not_estimable``, ``alpha_interval`` (the method, n and
    approximate flag: ``interval_fields``), ``alpha_small_sample`` (``sample_size_note``)
    and ``alpha_undefined`` (``alpha_undefined_reason``)."""
    alpha, ci95, not_estimable, method, p = _interval(matrix, bootstrap, seed, distance)
    details = {"n_units": p.n_units, "n_single": p.n_single, "n_distinct_values": len(p.domain)}
    return {
        "alpha": alpha,
        "alpha_ci95": ci95,
        "alpha_n": p.n_units,
        "alpha_ci95_not_estimable": not_estimable,
        "alpha_interval": interval_fields(method, p.n_units),
        "alpha_small_sample": sample_size_note(p.n_units, ci95) if alpha is not None else None,
        "alpha_undefined": alpha_undefined_reason(details) if alpha is None else None,
    }


def masi_alpha(matrix: Sequence[Sequence[frozenset[int] | None]]) -> float | None:
    """Krippendorff's alpha over sets with MASI distance (0 between two empty sets), with
    the krippendorff package and a custom distance. ``None`` when undefined."""
    p = pairable(matrix)
    return _package_alpha(p, masi_distance_matrix(p.domain), nominal=False)


def _annotation_value(row: AnnotationRow, kind: AlphaKind) -> Hashable:
    if kind == "binary":
        return row.has_failure
    if kind == "first_failure_location":
        return first_failure_location(row)
    if kind == "l2_step_sets_masi":
        return annotation_l2_steps(row)
    raise ValueError(f"unknown alpha kind {kind!r}; expected one of {', '.join(ALPHA_KINDS)}")


def reliability_matrix(
    annotations: Iterable[AnnotationRow], kind: AlphaKind
) -> tuple[list[str], list[str], list[list[Hashable | None]]]:
    """(items, annotators, matrix): the items x annotators matrix of the values ``kind``
    compares, ``None`` where an annotator did not label an item. Excluded rows are left
    out; items and annotators are sorted."""
    rows, _ = check_rows(annotations)
    items = sorted({row.item_id for row in rows})
    annotators = sorted({row.annotator for row in rows})
    item_index = {item: i for i, item in enumerate(items)}
    annotator_index = {annotator: j for j, annotator in enumerate(annotators)}
    matrix: list[list[Hashable | None]] = [[None] * len(annotators) for _ in items]
    for row in rows:
        matrix[item_index[row.item_id]][annotator_index[row.annotator]] = _annotation_value(row, kind)
    return items, annotators, matrix


def _kind_units(rows: Sequence[AnnotationRow], kind: AlphaKind) -> list[list[Hashable]]:
    """The non-missing cells of the reliability matrix, item by item: the same units as
    ``reliability_matrix`` without its (items x annotators) of mostly empty cells.
    ``rows`` must come from ``check_rows`` (sorted by item, then annotator)."""
    units: list[list[Hashable]] = []
    previous: str | None = None
    for row in rows:
        if row.item_id != previous:
            units.append([])
            previous = row.item_id
        units[-1].append(_annotation_value(row, kind))
    return units


def _kind_delta(p: Pairable[Hashable], kind: AlphaKind) -> npt.NDArray[np.float64]:
    if kind == "l2_step_sets_masi":
        # This kind's values are the annotations' sets of L2 steps (``annotation_l2_steps``).
        return masi_distance_matrix(cast("list[frozenset[int]]", p.domain))
    return nominal_distance_matrix(len(p.domain))


def krippendorff_alpha(annotations: Iterable[AnnotationRow], kind: AlphaKind) -> float | None:
    """Krippendorff's alpha of one kind over the counted annotations (not excluded, not surplus):

    * ``binary``: nominal over has_failure;
    * ``first_failure_location``: nominal over ``first_failure_location``;
    * ``l2_step_sets_masi``: over ``annotation_l2_steps`` with ``masi_distance``.

    ``None`` when undefined (no item with two annotations, or no variation)."""
    if kind not in ALPHA_KINDS:
        raise ValueError(f"unknown alpha kind {kind!r}; expected one of {', '.join(ALPHA_KINDS)}")
    rows, _ = check_rows(annotations)
    p = pairable(_kind_units(rows, kind))
    return _package_alpha(p, _kind_delta(p, kind), nominal=kind != "l2_step_sets_masi")


def alpha_by_kind(
    rows: Sequence[AnnotationRow], *, bootstrap: int, rng: np.random.Generator
) -> dict[str, tuple[float | None, list[float] | None, dict[str, Any]]]:
    """Every kind's alpha over checked rows (``check_rows``: counted, sorted), its 95 % BCa
    bootstrap interval over the pairable items (``None`` where alpha is undefined,
    ``bootstrap`` is 0 or the interval is not estimable) and what it rests on: ``n_units``
    (pairable items), ``n_values``, ``n_single`` (items with one annotation),
    ``n_distinct_values``, ``n_bootstrap_undefined``, ``ci95_not_estimable`` (why the
    interval is null for a defined alpha) and ``interval_method`` (the registry key: the
    item bootstrap, or the Wilson bound at perfect agreement). The three
    kinds share one stream of resamples drawn from ``rng``, so their intervals are paired."""
    inputs: dict[str, AlphaInput] = {}
    alpha: dict[str, float | None] = {}
    for kind in ALPHA_KINDS:
        p = pairable(_kind_units(rows, kind))
        inputs[kind] = AlphaInput(p, _kind_delta(p, kind), nominal=kind != "l2_step_sets_masi")
        alpha[kind] = _package_alpha(p, inputs[kind].delta, inputs[kind].nominal)
    intervals = alpha_bootstraps(inputs, bootstrap, rng, alpha)
    result: dict[str, tuple[float | None, list[float] | None, dict[str, Any]]] = {}
    for name, x in inputs.items():
        interval, undefined, reason, method = intervals[name]
        defined = alpha[name] is not None
        result[name] = (
            alpha[name],
            interval if defined else None,
            {
                "n_units": x.pairable.n_units,
                "n_values": x.pairable.n_values,
                "n_single": x.pairable.n_single,
                "n_distinct_values": len(x.pairable.domain),
                "n_bootstrap_undefined": undefined if defined else 0,
                "ci95_not_estimable": reason if defined else None,
                "interval_method": method,
            },
        )
    return result


def alpha_undefined_reason(details: Mapping[str, Any]) -> str | None:
    """Why alpha is undefined, as a sentence, from one kind's ``alpha_details``; ``None``
    when it is defined. Alpha needs items with two or more annotations (pairable units)
    whose values vary: with no pairable item there is nothing to compare, and with one
    value everywhere the expected disagreement D_e is 0 and alpha = 1 - D_o / D_e is 0/0."""
    if details["n_units"] == 0:
        single = details["n_single"]
        return (
            f"no item has two annotations ({single} item{'' if single == 1 else 's'} "
            f"ha{'s' if single == 1 else 've'} one), so no two annotators can be compared"
        )
    if details["n_distinct_values"] < 2:
        return (
            f"every annotation of the {details['n_units']} items with two or more annotations gives the same "
            f"value, so there is no variation to measure agreement against (expected disagreement 0)"
        )
    return None


# The fields of a study's alpha and its interval, as a summary, the API and an export show them.
ALPHA_KEYS = (
    "alpha",
    "alpha_ci95",
    "alpha_n",
    "alpha_ci95_not_estimable",
    "alpha_interval",
    "alpha_small_sample",
    "alpha_undefined",
)
