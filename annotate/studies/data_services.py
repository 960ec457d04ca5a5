"""Writes of the data manager (docs/annotation.md, "The data manager"): items added to a study
that is already running, a selection's answers excluded or restored, a selection added to a
pilot round. Each is keyword-only and runs in one transaction: a refusal changes nothing.

Items added to a running study join its pool as any other: each main item gets the study's
k (``annotators_per_item``) annotators through the ordinary reservations
(annotate/participation/reservations.py), after the items already there (positions continue
from the last). They belong to the round of the study they are added to: its round alpha and
reports count them, the other rounds of its family do not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.db.models import Max, QuerySet

from annotate.errors import AnnotateError
from annotate.kinds.base import ROLE_MAIN, ROLE_QUALIFICATION, ItemSpec
from annotate.models import Annotation, Study, StudyItem
from annotate.studies.imports import study_upload_discard, study_upload_store, upload_problem_lines
from annotate.studies.item_sources import items_from_judgments, study_items_gather
from annotate.studies.round_selectors import study_rounds
from annotate.studies.services import study_item_specs, study_items_insert, study_round_create
from core.app_errors import Conflict, InvalidInput
from core.record_files import RecordError
from core.stored_values import StrictJSONError, check_stored_values

# An annotation a researcher excluded carries this before the reason they gave, so that
# restoring touches only those (never an exclusion for failed attention checks).
RESEARCHER_EXCLUSION = "researcher: "
EXCLUSION_REASON_MAX = 200 - len(RESEARCHER_EXCLUSION)  # Annotation.exclusion_reason's column
ROUND_NEW = "new"


@dataclass(frozen=True)
class ItemsAdded:
    """What ``study_items_add`` did: the items added, and the ids skipped (already in the study)."""

    study: Study
    added: list[str]
    skipped: list[str]


def _check_storable(items: list[ItemSpec]) -> None:
    fields = ("item_id", "topic", "goal", "reference_steps", "candidate_steps", "explanation", "source", "expected")
    for n, spec in enumerate(items):
        try:
            check_stored_values(StudyItem, {name: getattr(spec, name) for name in fields})
        except StrictJSONError as exc:
            raise InvalidInput(fields={f"items[{n}].{exc.field or 'item'}": exc.message}) from exc


@transaction.atomic
def study_items_add(*, study: Study, items: list[ItemSpec], skip_existing: bool = False) -> ItemsAdded:
    """Add ``items`` to ``study``, running or not, after its items of the same role. An
    item_id the study already has is refused (``Conflict`` naming ``items``), or skipped with
    ``skip_existing``; two items with the same id in ``items`` are refused. Qualification items
    cannot be added once anyone has entered the study (those who passed took the test without
    them; start a new round instead); attention checks can, with the study's rate unchanged."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if not items:
        raise InvalidInput(fields={"items": "no item to add"})
    ids = [spec.item_id for spec in items]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInput(fields={"items": f"the item id {twice!r} is given twice"})
    if study.participations.exists() and any(spec.role == ROLE_QUALIFICATION for spec in items):
        raise InvalidInput(
            fields={
                "items": "qualification items cannot be added once annotators have entered the study (those who "
                "passed took the test without them); start a new round for a new test"
            }
        )
    existing = set(StudyItem.objects.filter(study=study, item_id__in=ids).values_list("item_id", flat=True))
    if existing and not skip_existing:
        shown = ", ".join(repr(i) for i in sorted(existing)[:5])
        raise Conflict(fields={"items": f"{len(existing)} item id(s) are already in the study: {shown}"})
    new = [spec for spec in items if spec.item_id not in existing]
    _check_storable(new)
    last = dict(
        StudyItem.objects.filter(study=study)
        .order_by()
        .values("role")
        .annotate(m=Max("position"))
        .values_list("role", "m")
    )
    study_items_insert(study, new, after=last)
    return ItemsAdded(study=study, added=[s.item_id for s in new], skipped=sorted(existing))


def _selected_answers(study: Study, items: QuerySet[StudyItem], annotator: str) -> QuerySet[Annotation]:
    answers = Annotation.objects.filter(study=study, item__in=items.values("pk"), source=ROLE_MAIN, is_test=False)
    return answers.filter(annotator__pid=annotator.lower()) if annotator else answers


@transaction.atomic
def study_items_exclude(*, study: Study, items: QuerySet[StudyItem], reason: str, annotator: str = "") -> int:
    """Exclude the main-pool answers of ``items`` (only ``annotator``'s, when given) that are
    not excluded yet: they stay stored and exported, marked excluded with the researcher's
    ``reason``, and leave alpha, the human majority and every agreement, as an attention
    check's exclusion does. Their slots stay filled (k is about people's time, which was
    spent). Returns the number excluded."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput(fields={"reason": "say why these answers are excluded (it is stored with each)"})
    if len(reason) > EXCLUSION_REASON_MAX:
        raise InvalidInput(fields={"reason": f"at most {EXCLUSION_REASON_MAX} characters, got {len(reason)}"})
    return (
        _selected_answers(study, items, annotator)
        .filter(excluded=False)
        .update(excluded=True, exclusion_reason=RESEARCHER_EXCLUSION + reason)
    )


@transaction.atomic
def study_items_restore(*, study: Study, items: QuerySet[StudyItem], annotator: str = "") -> int:
    """Undo ``study_items_exclude`` on ``items`` (only ``annotator``'s answers, when given):
    the answers a researcher excluded count again. An exclusion for failed attention checks
    is not a researcher's and stays. Returns the number restored."""
    return (
        _selected_answers(study, items, annotator)
        .filter(excluded=True, exclusion_reason__startswith=RESEARCHER_EXCLUSION)
        .update(excluded=False, exclusion_reason="")
    )


def study_round_choices(study: Study) -> list[Study]:
    """The pilot rounds a selection of ``study`` can be added to: the other rounds of its family."""
    return [r for r in study_rounds(study) if r.pk != study.pk]


def study_items_add_to_round(
    *, study: Study, items: QuerySet[StudyItem], round: int | str, instructions: str = "", created_by: Any = None
) -> ItemsAdded:
    """Copy the main items of ``items`` into a pilot round of ``study``'s family (a round is a
    study of its own, with its own guidelines, annotators and alpha: ``Study.round``): into the
    round numbered ``round`` (``study_items_add``, items it already has skipped), or, with
    ``round="new"``, into a new round made of these items and the study's attention-check and
    qualification items, under ``instructions`` (empty: the study's guidelines)."""
    main = items.filter(role=ROLE_MAIN)
    if not main.exists():
        raise InvalidInput(fields={"items": "the selection has no main-pool item (only those go to a round)"})
    if round == ROUND_NEW:
        checks = StudyItem.objects.filter(study=study).exclude(role=ROLE_MAIN)
        specs = study_item_specs(study, main) + study_item_specs(study, checks)
        new = study_round_create(
            study=study,
            instructions=instructions.strip() or study.guideline_version.instructions,
            created_by=created_by,
            items=specs,
        )
        return ItemsAdded(study=new, added=[s.item_id for s in specs if s.role == ROLE_MAIN], skipped=[])
    rounds = {r.round: r for r in study_round_choices(study)}
    if round not in rounds:
        offered = ", ".join(str(n) for n in sorted(rounds)) or "none yet"
        raise InvalidInput(
            fields={"round": f"no other round of this study is numbered {round!r}; its rounds: {offered}, or new"}
        )
    return study_items_add(study=rounds[int(round)], items=study_item_specs(study, main), skip_existing=True)


def study_items_add_from_upload(
    *,
    study: Study,
    upload: File | None = None,
    judge: str = "",
    n_judged: int | None = None,
    seed: int = 0,
    topics: list[str] | None = None,
    models: list[str] | None = None,
) -> ItemsAdded:
    """Items added to a running study by the page and the API, gathered as a new study's are
    (``study_items_gather``): an items file in the study kind's shape (read in the request:
    a file the New study page would hand to a worker is refused, naming ``items_file``) and/or
    ``n_judged`` judged generations of ``judge`` (stratified by topic and label, the study's own
    generations never drawn again). Bad lines are an ``InvalidInput`` whose ``items_file``
    lists each with its line and field; an item id the study has, or a judge whose every
    generation is in the study already, is a ``Conflict``."""
    if upload is None and not judge:
        raise InvalidInput(fields={"items_file": "send an items file, or a judge to sample judged generations from"})
    if judge and not n_judged:
        raise InvalidInput(fields={"n_judged": "how many judged generations to add"})
    stored = study_upload_store(upload) if upload is not None else None
    try:
        if stored is not None and stored.background:
            raise InvalidInput(
                fields={
                    "items_file": f"{stored.original_name} is too large to add in one request (over "
                    f"{settings.UPLOAD_BACKGROUND_MIN_BYTES:,} bytes or {settings.UPLOAD_BACKGROUND_MIN_RECORDS:,} "
                    "items); split it into smaller files"
                }
            )
        existing = frozenset(StudyItem.objects.filter(study=study).values_list("item_id", flat=True))
        try:
            items = study_items_gather(
                kind=study.kind,
                judge=judge or None,
                n_judged=n_judged,
                seed=seed,
                file_path=stored.path if stored else None,
                file_name=upload.name if upload is not None else None,
                topics=topics,
                models=models,
                exclude_item_ids=existing,
            )
        except RecordError as exc:
            assert upload is not None  # only a file has lines
            raise InvalidInput(
                "The items file has bad lines; nothing was added.",
                fields={"items_file": upload_problem_lines(exc, upload.name or "items file")},
            ) from exc
        except AnnotateError as exc:
            if exc.errors:
                raise
            if judge and not stored and items_from_judgments(judge=judge, n=1, topics=topics, models=models):
                # The judge has generations, and the study holds every one of them already.
                raise Conflict(
                    fields={"judge": f"every judged generation of {judge!r} that matches is already in the study"}
                ) from exc
            raise InvalidInput(fields={"judge" if judge and not stored else "items_file": exc.message}) from exc
    finally:
        if stored is not None:
            study_upload_discard(stored)
    return study_items_add(study=study, items=items)
