"""What runs and jobs spent, as every page, API field and command shows it.

A ledger entry's ``cost_usd`` is null when its model has no price (a local server, a model
missing from the price table): unknown, never free (llm/prices.py). A sum over entries of
which any has no price is unknown too: ``cost_usd`` None (null in JSON, "unknown" in text,
``templates/includes/cost.html``), with ``n_unpriced``, how many of the entries have no
price. Only a sum whose every entry has a price is a number.

* ``ledger_cost_aggregates`` and ``cost_known``: the aggregates over any set of ledger
  entries, and their reading (the mining run's table per stage and model, and so its total);
* ``job_costs`` / ``job_cost``: what LLM jobs spent (the job rows of the LLM page, of its
  API and of the Django admin, the generation, judge and components runs' pages and ``bench_run status``, a CoScript
  run's phases and ``coscript_run status``), and ``costs_sum`` for a run of several jobs (a
  CoScript run's total). A job's sum is the cost it records (the entries it paid for: its
  keys under its ``run`` label, as its budget counts them); whether any of those entries has
  no price is read from the ledger."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.db.models import Aggregate, Count, Q, Sum

from llm.models import LedgerEntry, LLMJob

UNPRICED = Q(cost_usd__isnull=True)


def ledger_cost_aggregates() -> dict[str, Aggregate]:
    """``priced_usd`` (the sum of the entries with a price) and ``n_unpriced`` (the entries
    without one), for ``.aggregate`` or ``.annotate``; read the row with ``cost_known``.
    (Not named ``cost_usd``: the filter would then read the sum, not the field.)"""
    return {"n_unpriced": Count("pk", filter=UNPRICED), "priced_usd": Sum("cost_usd")}


def cost_known(priced_usd: Decimal | None, n_unpriced: int) -> Decimal | None:
    """The sum, or None (unknown) when any entry it sums has no price."""
    return None if n_unpriced else (priced_usd or Decimal(0))


def _unpriced_by_label(labels: set[str]) -> dict[str, int]:
    """Ledger entries without a price under each run label (one query for a page of runs)."""
    if not labels:
        return {}
    rows = LedgerEntry.objects.filter(UNPRICED, run__in=labels).values("run").annotate(n=Count("pk")).order_by()
    return {row["run"]: row["n"] for row in rows}


def _unpriced_of_job(job: LLMJob, chunk: int = 2000) -> int:
    """The entries without a price among those ``job`` paid for (its keys under its label):
    a label is shared by a job's shards, and by a mining run's Batch API waves."""
    keys = list(dict.fromkeys(job.keys))
    return sum(
        LedgerEntry.objects.filter(UNPRICED, run=job.run, key__in=keys[start : start + chunk]).count()
        for start in range(0, len(keys), chunk)
    )


def _spent(job: LLMJob, n_unpriced: int) -> dict[str, Any]:
    cost = cost_known(job.cost_usd, n_unpriced)
    return {
        "cost_usd": cost,
        "n_unpriced": n_unpriced,
        # No request has an outcome yet: a page says "nothing spent yet", not a price it
        # cannot know (0.0000 USD for a model without a price)
        "nothing_yet": not any((job.outcome_counts or {}).values()),
        # Cost so far scaled to all requests: unknown when the cost so far is.
        "projected_cost_usd": None if cost is None else job.projected_cost_usd,
    }


def job_costs(jobs: Iterable[LLMJob | None], *, exact: bool = True) -> dict[int, dict[str, Any]]:
    """What each job spent (job id -> ``cost_usd``, None when unknown; ``n_unpriced``;
    ``projected_cost_usd``, None when unknown or finished). One query finds the run labels
    with entries without a price; ``exact``: a job under such a label then counts its own
    (its keys; a label is shared by a job's shards, a mining run's Batch API waves and its
    job-less requests), else the label's count stands for it: exact for the job of a run
    that owns one (``label:<run id>``), so lists of such runs count cheaply."""
    found = [job for job in jobs if job is not None]
    by_label = _unpriced_by_label({job.run for job in found})
    return {
        job.pk: _spent(job, (_unpriced_of_job(job) if exact else by_label[job.run]) if by_label.get(job.run) else 0)
        for job in found
    }


def job_cost(job: LLMJob | None, *, exact: bool = True) -> dict[str, Any] | None:
    """``job_costs`` of one job (None for no job)."""
    return None if job is None else job_costs([job], exact=exact)[job.pk]


def costs_sum(costs: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The sum of ``job_costs``' values: unknown when any is; None for none."""
    costs = list(costs)
    if not costs:
        return None
    n_unpriced = sum(cost["n_unpriced"] for cost in costs)
    total = sum((cost["cost_usd"] or Decimal(0) for cost in costs), Decimal(0))
    return {"cost_usd": cost_known(total, n_unpriced), "n_unpriced": n_unpriced}


def cost_json(cost: dict[str, Any] | None) -> float | None:
    """A cost for a command's JSON: a number, or null when unknown (or no job)."""
    return None if cost is None or cost["cost_usd"] is None else float(cost["cost_usd"])
