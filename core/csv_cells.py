"""CSV cells that a spreadsheet cannot execute (pure: no Django imports).

Spreadsheets (Excel, LibreOffice Calc, Google Sheets) evaluate a cell whose text begins with
``=``, ``+``, ``-`` or ``@`` as a formula, and a leading tab or carriage return can hide such a
start; a formula can open URLs, read other cells or, through DDE, run programs. Every CSV the
product writes passes each cell through :func:`csv_cell` (use :func:`csv_writer` rather than
``csv.writer``), which applies one rule:

* **Text** that begins with one of :data:`FORMULA_TRIGGERS` gets a single quote in front
  (``=1+1`` is written ``'=1+1``); the spreadsheet shows the text and never evaluates it.
  This holds for text that merely looks like a number, too (an annotator's comment ``-1``
  is written ``'-1``): it came in as text, so it stays text.
* **Real numbers** (``int``, ``float``, ``Decimal`` values that are finite) are written as they
  are, negative ones included: ``-0.52`` is a number to every spreadsheet, not a formula.
  Non-finite floats are written as their text under the text rule (``-inf`` becomes ``'-inf``).
* ``None`` stays ``None`` (an empty cell); booleans are written ``true`` and ``false``, in
  every CSV alike (as JSON writes them; Python's ``csv`` would write ``True``/``False``);
  anything else is written as ``str(value)`` under the text rule.

The JSONL exports are data, not spreadsheets, and carry every value unchanged."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from decimal import Decimal
from typing import IO, Any

# The characters that make a spreadsheet read a cell as a formula when they come first; the
# full-width forms of = + - @ are read the same way by some spreadsheets in East Asian locales.
FORMULA_TRIGGERS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")

NEUTRALISING_PREFIX = "'"


def _neutral_text(text: str) -> str:
    return NEUTRALISING_PREFIX + text if text.startswith(FORMULA_TRIGGERS) else text


def csv_cell(value: Any) -> Any:
    """The value as a CSV cell no spreadsheet evaluates (the rule in the module docstring)."""
    if value is None:
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, (float, Decimal)):
        finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
        return value if finite else _neutral_text(str(value))
    return _neutral_text(value if isinstance(value, str) else str(value))


def csv_row(values: Iterable[Any]) -> list[Any]:
    """Every cell of a row through :func:`csv_cell`."""
    return [csv_cell(v) for v in values]


class NeutralisingWriter:
    """``csv.writer`` whose rows pass through :func:`csv_row` first."""

    def __init__(self, handle: IO[str], **options: Any):
        self._writer = csv.writer(handle, **options)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow(csv_row(row))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(handle: IO[str], **options: Any) -> NeutralisingWriter:
    """A CSV writer for every CSV the product writes: cells neutralised, ``csv`` options as usual."""
    return NeutralisingWriter(handle, **options)
