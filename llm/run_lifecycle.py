"""The one lifecycle of every run that owns LLM jobs: generation, judge and components runs
and goal-step evaluations (one job each), CoScript runs (a job per phase) and mining runs
(a job per stage of a Batch API wave).

* ``owned_run_job_attach`` and ``owned_run_execute``: a run owning one job gets it and
  executes it, and takes the state that is true when it stops.
* The four controls, the kernel every page, API endpoint and command goes through:
  ``owned_run_pause``, ``owned_run_resume``, ``owned_run_cancel`` and
  ``owned_run_retry_failed``. Each checks the state machine (``llm.run_models``; a refusal is
  ``RunStateConflict``, 409 ``run_state``), acts on every job the run owns
  (``Run.owned_jobs``), and moves the run with one conditional update. What differs between
  kinds of run is passed in: how it is queued, which of its jobs a resume reopens, what
  *Retry failed* marks to ask again.
* ``job_owner_register``: a run that owns LLM jobs registers how they are paused, resumed,
  cancelled and retried, so a job is only ever driven through its run (``llm_job_control``).
* ``run_control``: the one entry point of every run page, API control and command, for any
  run (by its model's registered owner) and any LLM job: it refuses an action that does not
  apply in the run's state with one text (``run_action_check``, the API's 409 ``detail`` and
  the page's message alike), then drives the run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from django.db import models, transaction
from django.utils import timezone

from core.app_errors import InvalidInput
from llm.job_lifecycle import CLAIMED, llm_job_cancel, llm_job_failed_count, llm_job_pause, llm_job_recount
from llm.models import LLMJob
from llm.run_models import (
    ACTIVE,
    FINISHED,
    PAUSED_BY_USER,
    RETRY_ACTIONS,
    RUN_ACTIONS,
    LiveRunState,
    Run,
    RunStateConflict,
    RunStatus,
    run_action_refusal,
)
from llm.runs import llm_job_held
from llm.services import llm_job_create, llm_job_execute, llm_job_resume, llm_job_retry_failed
from llm.shards import llm_job_shard

R = TypeVar("R", bound=Run)  # a kind of run, whose own hooks a control calls

# -- who owns a job -------------------------------------------------------------------


@dataclass(frozen=True)
class JobOwner:
    """How the run that owns a job (its ``run`` label starts with ``prefix``) pauses,
    resumes, cancels it and retries its failed requests: through the run, so the run's own
    step (storing judgments, moving to the next phase) is never skipped and the run's state
    never parts from its job's (a cancelled job under a paused run could never resume).
    ``control`` drives the run itself (``run_control``); ``noun`` names a run of the kind in
    what the pages and the API say of it; ``held`` says whether a worker is at work on the
    run now (resuming it is refused then)."""

    prefix: str
    model: type[models.Model]
    noun: str
    held: Callable[[Any], bool]
    resume: Callable[[LLMJob], Any]
    retry_failed: Callable[[LLMJob], int]
    describe: Callable[[LLMJob], str]
    pause: Callable[[LLMJob], Any]
    cancel: Callable[[LLMJob], Any]
    control: dict[str, Callable[[Any], Any]]


_OWNERS: list[JobOwner] = []


def job_owner(
    prefix: str,
    model: type[models.Model],
    *,
    resume: Callable[[Any], Any],
    retry_failed: Callable[[Any], int],
    pause: Callable[[Any], Any] = lambda run: owned_run_pause(run),
    cancel: Callable[[Any], Any] = lambda run: owned_run_cancel(run),
    held: Callable[[Any], bool] = lambda run: owned_jobs_held(run),
    noun: str,
) -> JobOwner:
    """An owner whose jobs are labelled ``<prefix><run id>[:...]``, runs of ``model``; each
    callable takes the run (pause and cancel: the kernel's, unless the run adds a step;
    ``held``: a worker holds one of the jobs it owns, unless the run says otherwise)."""

    def run_of(job: LLMJob):
        return model._default_manager.get(pk=int(job.run[len(prefix) :].split(":")[0]))

    return JobOwner(
        prefix=prefix,
        model=model,
        noun=noun,
        held=held,
        resume=lambda job: resume(run_of(job)),
        retry_failed=lambda job: retry_failed(run_of(job)),
        describe=lambda job: f"{noun} {run_of(job)}",
        pause=lambda job: pause(run_of(job)),
        cancel=lambda job: cancel(run_of(job)),
        control={"pause": pause, "resume": resume, "cancel": cancel, "retry": retry_failed},
    )


def job_owner_register(owner: JobOwner) -> None:
    """Called from an app's ``AppConfig.ready``; registering a prefix twice keeps the last."""
    _OWNERS[:] = [o for o in _OWNERS if o.prefix != owner.prefix] + [owner]


def owned_jobs_held(run: Run) -> bool:
    """Whether a worker is at work on one of the jobs ``run`` owns now (``llm_job_held``)."""
    return any(llm_job_held(job) for job in run.owned_jobs())


def job_owner_for(job: LLMJob) -> JobOwner | None:
    for owner in _OWNERS:
        if job.run.startswith(owner.prefix):
            return owner
    return None


def llm_job_control(*, job: LLMJob, action: str) -> int:
    """Pause, resume, cancel or *Retry failed* one LLM job (``action``: pause, resume,
    cancel, retry). A job owned by a run is driven through its run for every action, so the
    run's own step is never skipped and the run's state follows. Returns how many requests
    a retry re-asks."""
    owner = job_owner_for(job)
    if action == "pause":
        owner.pause(job) if owner else llm_job_pause(job=job)
    elif action == "cancel":
        owner.cancel(job) if owner else llm_job_cancel(job=job)
    elif action == "resume":
        owner.resume(job) if owner else llm_job_resume(job=job)
    elif action == "retry":
        return owner.retry_failed(job) if owner else llm_job_retry_failed(job=job, enqueue=True)
    else:
        raise InvalidInput(fields={"action": f"unknown action {action!r}: pause, resume, cancel or retry"})
    return 0


def _run_owner(run: Run) -> JobOwner | None:
    return next((owner for owner in _OWNERS if isinstance(run, owner.model)), None)


def _action(action: str) -> str:
    """The action's one name (*Retry failed* is ``retry``, whatever a page or the API calls
    it); an unknown action is refused."""
    action = "retry" if action in RETRY_ACTIONS else action
    if action not in RUN_ACTIONS:
        raise InvalidInput(fields={"action": f"unknown action {action!r}: pause, resume, cancel or retry"})
    return action


def run_label(run: Run) -> str:
    """A run as the pages and the API name it in what they say of it: its kind and itself
    ("judge run how2judge-1", "LLM job 12")."""
    if isinstance(run, LLMJob):
        return f"LLM job {run.pk}"
    owner = _run_owner(run)
    return f"{owner.noun if owner else 'run'} {run}"


def run_action_check(run: Run, action: str) -> None:
    """Refuse ``action`` (pause, resume, cancel or a retry) where it does not apply in the
    run's state, knowing whether a worker is at work on it now (``run_action_refusal``):
    ``RunStateConflict`` (409 ``run_state``) saying "<run> is <status>; <why>", the text the
    API's ``detail`` and the page's message both give."""
    action = _action(action)
    run.refresh_from_db(fields=["status"])  # the state as stored now, not as the caller read it
    held = False
    if action == "resume" and run.status in ACTIVE:  # only a resume asks whether a worker holds it
        owner = _run_owner(run)
        held = llm_job_held(run) if isinstance(run, LLMJob) else bool(owner and owner.held(run))
    refusal = run_action_refusal(action, run.status, held=held)
    if refusal is not None:
        raise RunStateConflict(f"{run_label(run)} is {run.status}; {refusal}")


def run_control(run: Run, action: str) -> int:
    """Pause, resume, cancel or *Retry failed* (``action``: pause, resume, cancel, retry,
    retry-failed or retry-failures) any run through the services its app registered, or an
    LLM job (through the run that owns it, ``llm_job_control``): what the pages, the API and
    the commands of every app call. Refused first where the action does not apply in the
    run's state (``run_action_check``). Returns how many a retry asks again (else 0)."""
    action = _action(action)
    run_action_check(run, action)
    if isinstance(run, LLMJob):
        return llm_job_control(job=run, action=action)
    owner = _run_owner(run)
    if owner is None:
        raise InvalidInput(fields={"action": f"{run_label(run)} cannot be driven: no app registered its kind"})
    done = owner.control[action](run)
    return done if action == "retry" and isinstance(done, int) else 0


# -- a run that owns one LLM job: created with it, executed through it ------------------


def _update(run, **fields: Any) -> None:
    type(run).objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)


def owned_run_job_attach(
    run,
    *,
    label: str,
    role: str,
    requests: list,
    executor: str,
    concurrency: int,
    budget_usd=None,
    endpoint_overrides: dict[str, str] | None = None,
) -> None:
    """Give a new run its LLM job over ``requests`` (named ``label:<run id>``, not started), cut
    into shards that any number of workers share, and store it on the run."""
    run.llm_job = llm_job_create(
        run=f"{label}:{run.pk}",
        role=role,
        requests=requests,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        endpoint_overrides=endpoint_overrides,
        start=False,
    )
    llm_job_shard(run.llm_job)
    run.save(update_fields=["llm_job"])


def owned_run_execute(
    run,
    *,
    collect: Callable[..., Any],
    unusable: Callable[[Any], int] | None = None,
    collect_shards: bool = False,
) -> str:
    """Execute a run's LLM job, store what it answered (``collect``, idempotent), and give
    the run the state that is true. With ``collect_shards``, ``collect(run, shard=...)``
    stores each shard's answers as soon as the shard is through, while other shards are
    still asked, and the store at the end has only the last ones left (the judge
    benchmark's 7,000 judgments took 1.4 s after the last answer). The state: ``done``
    only when every request has an ``ok`` answer and nothing stored is unusable (``unusable`` counts the run's stored items without a
    usable outcome, such as judge answers that failed validation); ``done_with_failures``
    otherwise; paused (with the job's reason, e.g. the breaker's), cancelled or failed as
    the job is. Returns what happened, for the task log."""
    if run.status in (*FINISHED, RunStatus.CANCELLED):
        return f"not active ({run.status})"
    # The job without its requests (a judge run's are ~14 kB each, thousands of them): this
    # task only needs its state and keys; the executor reads each shard's own requests.
    job = run.llm_job = LLMJob.objects.defer("requests").get(pk=run.llm_job_id)
    # Running, unless another worker settled or someone cancelled it since this task read it.
    type(run).objects.filter(pk=run.pk).exclude(status__in=(*FINISHED, RunStatus.CANCELLED)).update(
        status=RunStatus.RUNNING
    )
    run.status = RunStatus.RUNNING
    outcome = None
    try:
        shard_done = (lambda shard: collect(run, shard=shard)) if collect_shards else None
        outcome = "done" if job.status in FINISHED else llm_job_execute(job_id=job.pk, shard_done=shard_done)
    finally:  # what finished so far is stored even when the job paused or failed
        job.refresh_from_db()
        if outcome != CLAIMED:  # (while other workers hold shards, the last one to stop stores)
            _store_and_settle(run, job, collect=collect, unusable=unusable, settle=outcome is not None)
    if outcome == CLAIMED:
        _settle(run, job, unusable)
    return outcome


def _store_and_settle(
    run, job: LLMJob, *, collect: Callable[..., Any], unusable: Callable[[Any], int] | None, settle: bool
) -> None:
    """Store what the job answered and, unless an error is on its way up (``settle`` false),
    give the run its state, holding the run's row: workers that finish their last shards
    together store one after the other, and one that finds the run already settled on a
    finished job has nothing left to store (a judge run's 7,000 judgments were stored twice
    at once before, by both workers of the benchmark). A control clicked meanwhile waits for
    the store (about a second for 7,000 judgments)."""
    with transaction.atomic():
        status = type(run).objects.select_for_update().values_list("status", flat=True).get(pk=run.pk)
        if status in FINISHED and job.status in FINISHED:
            run.status = status
            return
        collect(run)
        if settle:
            _settle(run, job, unusable)


def _settle(run, job: LLMJob, unusable: Callable[[Any], int] | None) -> None:
    """The run's state from its job's: see ``owned_run_execute``."""
    if job.status in FINISHED:
        llm_job_recount(job)  # collect may have refused an ok answer (ledger_entry_reject)
        failed = job.status == RunStatus.DONE_WITH_FAILURES or bool(unusable and unusable(run))
        status = RunStatus.DONE_WITH_FAILURES if failed else RunStatus.DONE
        _update(run, status=status, pause_reason="", error="", finished_at=timezone.now())
    elif job.status == RunStatus.PAUSED:
        _update(run, status=RunStatus.PAUSED, pause_reason=job.pause_reason)
    elif job.status in (RunStatus.CANCELLED, RunStatus.FAILED):
        _update(run, status=job.status, error=job.error)


# -- the four controls: one kernel for every run ------------------------------------------


def _jobs(run: Run, action: str) -> list[LLMJob]:
    """The jobs ``run`` owns. A run meant to own one that has none (outputs filed from
    elsewhere, such as the demo's runs of the paper's examples) asked nothing, so there is
    nothing to ``action`` (409)."""
    jobs = run.owned_jobs()
    if not jobs and run.owns_one_job:
        raise RunStateConflict(
            f"{run} asked no requests of its own (its outputs were filed, not generated here): there is "
            f"nothing to {action}"
        )
    return jobs


def _checked(run: R, action: str, *, lock: bool = False) -> R:
    """The run as stored now (locked for the caller's transaction with ``lock``), refused
    with the state machine's reason when ``action`` does not apply in its state."""
    manager = type(run)._default_manager
    stored = (manager.select_for_update() if lock else manager).get(pk=run.pk)
    refusal = run_action_refusal(action, stored.status)
    if refusal is not None:
        raise RunStateConflict(f"{run_label(run)} is {stored.status}; {refusal}")
    return stored


def owned_run_pause(run: Run, *, reason: str = PAUSED_BY_USER) -> None:
    """Pause a pending or running run and every job it owns; its workers stop within
    seconds and what was answered is kept. ``reason`` becomes its pause reason."""
    _checked(run, "pause")
    for job in _jobs(run, "pause"):
        llm_job_pause(job=job, reason=reason)
    type(run)._default_manager.filter(pk=run.pk, status__in=ACTIVE).update(status=RunStatus.PAUSED, pause_reason=reason)
    run.status, run.pause_reason = RunStatus.PAUSED, reason


def owned_run_cancel(run: Run) -> None:
    """Cancel a run and every job it owns; a cancelled run is never resumed."""
    _checked(run, "cancel")
    for job in _jobs(run, "cancel"):
        llm_job_cancel(job=job)
    now = timezone.now()
    type(run)._default_manager.filter(pk=run.pk).exclude(status__in=FINISHED).update(
        status=RunStatus.CANCELLED, pause_reason="", finished_at=now
    )
    run.status, run.pause_reason, run.finished_at = RunStatus.CANCELLED, "", now


def jobs_reopen(jobs: Iterable[LLMJob], *, budget_usd: Decimal | None = None) -> int:
    """Put back in the queue every job that has requests to ask again (any but a cancelled
    one, or one done with every answer ``ok``). Returns how many."""
    n = 0
    for job in jobs:
        job.refresh_from_db(fields=["status"])
        if job.status == RunStatus.CANCELLED or (job.status == RunStatus.DONE and not llm_job_failed_count(job)):
            continue
        llm_job_resume(job=job, budget_usd=budget_usd, enqueue=False)
        n += 1
    return n


def _requeue(run: Run, *, enqueue: Callable[[], None], budget_usd: Decimal | None = None) -> None:
    """The run back in the queue: pending, without a pause reason or an error."""
    fields: dict[str, Any] = {"status": RunStatus.PENDING, "pause_reason": "", "error": "", "finished_at": None}
    if budget_usd is not None:
        fields["budget_usd"] = budget_usd
    if isinstance(run, LiveRunState):
        fields["breaker"] = {}
    _update(run, **fields)
    enqueue()


@transaction.atomic
def owned_run_resume(
    run: R,
    *,
    enqueue: Callable[[], None],
    budget_usd: Decimal | None = None,
    reopen: Callable[[R], Any] | None = None,
) -> None:
    """Continue a paused, failed or interrupted run: every request without an ``ok``
    answer is asked again, then the run stores the answers (never the job alone).
    ``reopen``: what the run puts back in the queue (default: each of its jobs with work
    left, ``jobs_reopen``); ``budget_usd``: a new budget for the run and its jobs."""
    stored = _checked(run, "resume", lock=True)
    if reopen is not None:
        reopen(stored)
    else:
        jobs_reopen(_jobs(stored, "resume"), budget_usd=budget_usd)
    _requeue(run, enqueue=enqueue, budget_usd=budget_usd)


@transaction.atomic
def owned_run_retry_failed(
    run: R,
    *,
    enqueue: Callable[[], None],
    discard_unusable: Callable[[Any], int] | None = None,
    failures: Callable[[R], int] | None = None,
    reopen: Callable[[R], Any] | None = None,
) -> int:
    """*Retry failed*: ask exactly the run's requests without an ``ok`` answer again, and
    store their new answers in place of the unusable ones (``discard_unusable`` drops
    those first). ``failures``: marks what the run asks again and says how many (default:
    its jobs' requests without an ``ok`` answer); a run done with nothing to ask stays
    done. Returns how many are re-asked."""
    stored = _checked(run, "retry", lock=True)
    failed = failures(stored) if failures is not None else sum(llm_job_failed_count(j) for j in _jobs(stored, "retry"))
    if discard_unusable is not None:
        discard_unusable(run)
    if not failed and stored.status == RunStatus.DONE:
        return 0
    if reopen is not None:
        reopen(stored)
    else:
        jobs_reopen(_jobs(stored, "retry"))
    _requeue(run, enqueue=enqueue)
    return failed
