"""Writes of a study's allocation: a study with a target interval width stops when its
PPI++ How2Score interval is that narrow (``study_target_check``), and apps built on annotate
learn of it through hooks they register (prolific closes the linked Prolific study so no more
places are paid for; annotate never imports prolific)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.db import transaction

from annotate.models import Study
from annotate.participation import clock
from annotate.participation.allocation import target_reached
from annotate.participation.allocation_selectors import study_allocation

TargetReachedHook = Callable[[Study], None]
_HOOKS: list[TargetReachedHook] = []


def target_reached_hook_register(hook: TargetReachedHook) -> None:
    """Call ``hook(study)`` after the transaction in which a study reaches its target commits."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def target_reached_hook_unregister(hook: TargetReachedHook) -> None:
    if hook in _HOOKS:
        _HOOKS.remove(hook)


def _run_hooks(study_id: int) -> None:
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return
    for hook in list(_HOOKS):
        # robust: a hook that fails is logged and never undoes the stop, nor skips the next hook
        transaction.on_commit(partial(hook, study), robust=True)


@transaction.atomic
def study_target_check(*, study: Study) -> bool:
    """Stop ``study`` when its interval has reached the target width: ``target_reached_at`` is
    set once (a conditional update, so two submits at once stop it once), the study offers no
    more items from then on, and the registered hooks run after the commit. Returns whether
    this call stopped it."""
    if study.target_interval_width is None or study.target_reached_at is not None:
        return False
    state = study_allocation(study)
    if not target_reached(state["interval_width"], study.target_interval_width, unsettled=state["interval_unsettled"]):
        return False
    now = clock.now()
    stopped = Study.objects.filter(pk=study.pk, target_reached_at__isnull=True).update(target_reached_at=now)
    if not stopped:
        return False
    study.target_reached_at = now
    study_id = study.pk
    transaction.on_commit(lambda: _run_hooks(study_id), robust=True)
    return True
