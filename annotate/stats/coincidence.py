"""The coincidence form of Krippendorff's alpha: the pairable units of an items x coders
matrix and alpha computed from them at any distance between values. Pure Python and NumPy,
no Django.

``alpha.py`` builds its estimates on these, and ``alpha_bootstrap.py`` resamples the same
units. The value domain is put in a total order first, so no result depends on the order of
the input rows."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

V = TypeVar("V", bound=Hashable)


def nominal_distance_matrix(n_values: int) -> npt.NDArray[np.float64]:
    """The nominal distance between ``n_values`` values: 0 on the diagonal, 1 elsewhere."""
    return 1.0 - np.eye(n_values)


def _value_sort_key(value: Hashable) -> tuple[Any, ...]:
    """A total order over the values we meet (bools, ints, strings, frozensets of ints),
    so the value domain, and with it every float sum, does not depend on input order."""
    if isinstance(value, frozenset):
        return (3, len(value), tuple(sorted(value)))
    if isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, int):
        return (1, value, "")
    return (2, 0, str(value))


@dataclass(frozen=True)
class Pairable(Generic[V]):
    """The pairable part of a reliability matrix: units holding at least two values.

    ``unit_of`` and ``value_of`` give, for every pairable value (sorted by unit), its unit
    and its index in ``domain``; ``m`` is the number of values per unit."""

    domain: list[V]
    unit_of: npt.NDArray[np.intp]
    value_of: npt.NDArray[np.intp]
    m: npt.NDArray[np.float64]
    n_units: int
    n_single: int

    @property
    def n_values(self) -> int:
        return int(self.unit_of.size)

    def counts(self) -> npt.NDArray[np.float64]:
        """Units x values count matrix (dense)."""
        counts = np.zeros((self.n_units, len(self.domain)))
        np.add.at(counts, (self.unit_of, self.value_of), 1.0)
        return counts


def pairable(matrix: Sequence[Sequence[V | None]]) -> Pairable[V]:
    """Build the pairable units of an items x coders matrix (``None`` = missing cell)."""
    units = [[value for value in row if value is not None] for row in matrix]
    paired = [unit for unit in units if len(unit) >= 2]
    n_single = sum(1 for unit in units if len(unit) == 1)
    domain = sorted({value for unit in paired for value in unit}, key=_value_sort_key)
    index = {value: position for position, value in enumerate(domain)}
    unit_of = np.array([u for u, unit in enumerate(paired) for _ in unit], dtype=np.intp)
    value_of = np.array([index[value] for unit in paired for value in unit], dtype=np.intp)
    m = np.array([len(unit) for unit in paired], dtype=np.float64)
    return Pairable(domain, unit_of, value_of, m, len(paired), n_single)


def within_unit_disagreement(p: Pairable[V], delta: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """For every unit u: the sum of distances over its ordered pairs of values (i != j)."""
    m_of_value = p.m.astype(np.intp)[p.unit_of]
    first_of_unit = np.concatenate(([0], np.cumsum(p.m.astype(np.intp))[:-1]))
    left = np.repeat(np.arange(p.n_values), m_of_value)
    offset = np.arange(left.size) - np.repeat(np.cumsum(m_of_value) - m_of_value, m_of_value)
    right = np.repeat(first_of_unit[p.unit_of], m_of_value) + offset
    # i == j pairs add delta[v, v] = 0, so they need no masking.
    weights = delta[p.value_of[left], p.value_of[right]]
    # bincount with float weights counts in float64 (numpy's stubs say intp): asarray only retypes it.
    return np.asarray(np.bincount(p.unit_of[left], weights=weights, minlength=p.n_units), dtype=np.float64)


def alpha_from_pairable(p: Pairable[V], delta: npt.NDArray[np.float64]) -> float | None:
    """alpha = 1 - D_o / D_e from the coincidence definition, where with n pairable values,
    m_u values in unit u, n_c pairable values equal to c and delta the distance:
    D_o = (1/n) * sum_u sum_{i != j in u} delta(v_i, v_j) / (m_u - 1) and
    D_e = (1/(n (n - 1))) * sum_{c, k} n_c n_k delta(c, k)."""
    if p.n_units == 0 or len(p.domain) < 2:
        return None
    n = p.m.sum()
    observed = (within_unit_disagreement(p, delta) / (p.m - 1.0)).sum()
    n_c = np.bincount(p.value_of, minlength=len(p.domain)).astype(np.float64)
    expected = float(n_c @ delta @ n_c)
    if expected <= 0.0:
        return None
    return float(1.0 - (n - 1.0) * observed / expected)
