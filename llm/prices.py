"""Prices per model (USD per million tokens) from LLM_PRICES_FILE; cost of a request."""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache

from django.conf import settings

from llm.constants import EXECUTOR_BATCH


@lru_cache(maxsize=4)
def _prices(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return {"batch_discount": data.get("batch_discount", 0.5), "models": data.get("models", {})}


def prices_get() -> dict:
    return _prices(settings.LLM_PRICES_FILE)


def request_cost(
    *,
    model: str,
    tokens_in: int,
    tokens_out: int,
    executor: str,
    price_input: Decimal | None = None,
    price_output: Decimal | None = None,
) -> Decimal | None:
    """Cost in USD, or None when the model has no price (unknown is not free). An endpoint
    record's prices (``price_input`` / ``price_output``, USD per million tokens) win over
    the price table."""
    prices = prices_get()
    price = prices["models"].get(model)
    if price_input is not None and price_output is not None:
        price = {"input": price_input, "output": price_output}
    elif price_input is not None or price_output is not None:  # one given: the table's other, else unknown
        if price is None:
            return None
        price = {
            "input": price_input if price_input is not None else price["input"],
            "output": price_output if price_output is not None else price["output"],
        }
    if price is None:
        return None
    cost = (Decimal(str(price["input"])) * tokens_in + Decimal(str(price["output"])) * tokens_out) / Decimal(1_000_000)
    if executor == EXECUTOR_BATCH:
        cost *= Decimal(str(prices["batch_discount"]))
    return cost.quantize(Decimal("0.000001"))
