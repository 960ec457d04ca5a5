"""How a mining run executes: documents are claimed by workers in chunks and walked through
the six stages one after the other; a document's stage results and its new state are
written together when its walk ends.

* **Overlap.** A worker thread takes one document through all its stages before taking
  the next; with ``concurrency`` threads, documents sit at every stage at once, so the
  stages overlap and at most ``concurrency`` requests are in flight per worker.
* **Resume.** A document's walk starts from the beginning every time, but a stage whose
  stored result came from the same request (the ledger key of the rendered prompt,
  model, sampling parameters and schema; for the heuristics a hash of their input) is
  taken as stored. A killed worker therefore loses only the calls in flight, and the
  LLM ledger answers requests that finished but were not yet stored (a walk keeps its
  results in memory until it ends).
* **Changed prompts or models.** The same rule re-runs exactly the stage whose request
  changed and, where its answer changes their input, the stages after it.
* **Outcomes apart.** A stage either passes, rejects with its reason, or its call fails
  (``parse_failed``, ``truncated``, ``refused``, ``api_error``). A failed document is
  retried ``failure_retries`` times (asking again, not reusing the failed answer) and
  then listed as failed, never counted as rejected.
* **Claims.** Documents are claimed in chunks with a lease (``FOR UPDATE SKIP LOCKED``
  where the database has it), so several Celery tasks (``workers``) share a run without
  taking the same document; a dead worker's claims are released on resume or after the
  lease. A chunk is read at once: documents, stored stage results and one ledger lookup
  for the requests the chunk's walks will start with (``Walker.ledger_prefetch``).
* **CPU.** Each walk's thread CPU time is added to its document (``cpu_ms``), shown per
  document with its n on the run page.
* **Waves (Batch API, in-process vLLM).** With ``executor: batch``, or when a stage has
  an executor of its own (``stages.<stage>.executor: vllm_offline``: the model runs
  in-process on this machine's GPU), the walk collects the requests documents need next,
  sends them as one LLM job per stage with that stage's executor (``batch``,
  ``vllm_offline`` with the stage's engine options, or ``online`` for the other stages),
  and walks again when the answers are in the ledger. A run whose stages are all online
  keeps the threaded walk above.

Where each part lives: how a stage is asked (``mining/stage_plans.py``); the stages on one
base, heuristics included (``mining/walk_stages.py``); the walk of one document and its
write (``mining/walker.py``); sampling, claims and the end of a run
(``mining/run_claims.py``); the threaded online execution (``mining/online_runner.py``);
the waves (``mining/waves.py``). This module starts a worker's share of a run."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from mining.models import MiningRun, MiningRunStatus
from mining.online_runner import mining_run_work
from mining.stage_plans import run_uses_waves
from mining.waves import mining_run_batch_step


def mining_run_execute(*, run_id: int) -> str:
    """Execute (one worker's share of) a run. Returns what happened, for the task log."""
    with transaction.atomic():
        run = MiningRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return "gone"
        if run.status not in (MiningRunStatus.PENDING, MiningRunStatus.RUNNING):
            return f"not active ({run.status})"
        run.status = MiningRunStatus.RUNNING
        run.started_at = run.started_at or timezone.now()
        run.heartbeat_at = timezone.now()  # its first beat; the work beats from here on
        run.save(update_fields=["status", "started_at", "heartbeat_at"])
    if not run_uses_waves(run):
        return mining_run_work(run)
    return mining_run_batch_step(run)
