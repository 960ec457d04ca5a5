"""Review decisions and gold labels: the writes (annotate/review/rules.py has the rules).

``annotation_review`` records a decision on one annotation or many (a bulk review); the latest
decision counts, mirrored on ``Annotation.review``:

* a **rejection** excludes the annotation (``exclusion_reason`` ``REVIEW_EXCLUSION_REASON``), so
  it leaves every statistic by the one counted rule (``annotations_counted``, counted in
  ``n_excluded``); the message and the category go to Prolific with the participant's review
  (prolific/review_services.py, ``prolific_review``);
* a **correction** puts the reviewer's answer, cleaned by the kind as a submitted answer is,
  in the annotation's answer columns (so every report counts it), and keeps the annotator's
  own in ``submitted_answer``;
* an **accept** (or any later decision) puts back what an earlier one changed: the annotator's
  answer, and the inclusion a rejection took away (an exclusion for another reason, such as
  failed attention checks, stays).

``gold_label_set`` settles an item into its gold label; ``gold_label_delete`` takes it away;
``gold_qualification_add`` gives a later study the gold-labelled items as qualification items."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotate import constants as C
from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_MAIN, ROLE_QUALIFICATION, FieldError, ItemSpec, StudyKind
from annotate.models import Annotation, Study, StudyItem
from annotate.review import rules
from annotate.review.models import AnnotationReview, GoldLabel
from annotate.studies.data_services import ItemsAdded, study_items_add
from annotate.studies.selectors import annotations_counted
from core.app_errors import Conflict, InvalidInput, NotFound
from core.strict_json import StrictJSONError, check_value

# The exclusion reason of a rejected annotation (the one a later accept or correction lifts).
REVIEW_EXCLUSION_REASON = "rejected_in_review"


def _refuse(errors: list[FieldError], what: str) -> InvalidInput:
    fields: dict[str, list[str]] = {}
    for error in errors:
        fields.setdefault(error.field, []).append(error.message)
    return InvalidInput(f"{what}: " + "; ".join(f"{e.field}: {e.message}" for e in errors), fields)


def answer_clean(*, kind: StudyKind, item: StudyItem, answer: Any, field: str = "answer") -> dict[str, Any]:
    """A researcher's answer (a correction or a gold label) checked as an annotator's submit is:
    strict JSON first (no NaN, NUL or over-long text), then the kind's ``validate_submission``
    for this item's step counts. Refusals name the field under ``field`` (``answer.has_failure``).
    An annotator's flag is not an answer and is refused."""
    if not isinstance(answer, dict):
        raise InvalidInput(
            f"{field}: an object in the kind's answer shape", {field: "an object in the kind's answer shape"}
        )
    if "flag" in answer:
        raise InvalidInput(
            f"{field}.flag: a flag is the annotator's, not part of a reviewed answer",
            {f"{field}.flag": "not allowed here"},
        )
    try:
        check_value(answer, field=field, max_string_length=C.MAX_DRAFT_STRING_LENGTH)
    except StrictJSONError as exc:
        raise InvalidInput(f"{exc.field}: {exc.message}", {exc.field or field: exc.message}) from None
    cleaned, errors = kind.validate_submission(answer, len(item.reference_steps), len(item.candidate_steps))
    if errors or cleaned is None:
        raise _refuse([FieldError(f"{field}.{e.field}", e.message) for e in errors], "The answer was refused")
    return cleaned


def _ids(value: Any, field: str) -> list[int]:
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidInput(f"{field}: a list of annotation ids", {field: "a non-empty list of annotation ids"})
    if len(value) > rules.BULK_MAX:
        raise InvalidInput(
            f"{field}: at most {rules.BULK_MAX} annotations at once", {field: f"at most {rules.BULK_MAX} at once"}
        )
    ids: list[int] = []
    for v in value:
        if isinstance(v, bool) or not (
            isinstance(v, int) or (isinstance(v, str) and v.strip().isdigit() and len(v) < 19)
        ):
            raise InvalidInput(f"{field}: {str(v)[:40]!r} is not an annotation id", {field: "whole numbers only"})
        number = int(v)
        if not 0 < number < 2**63:
            raise InvalidInput(f"{field}: {number} is not an annotation id", {field: "whole numbers only"})
        ids.append(number)
    return list(dict.fromkeys(ids))


def _restore(annotation: Annotation) -> None:
    """Undo what an earlier decision changed: the annotator's own answer back in place of a
    correction, and an exclusion by rejection lifted."""
    if annotation.submitted_answer is not None:
        original = annotation.submitted_answer
        annotation.answer = original.get("answer", {})
        annotation.has_failure = original.get("has_failure")
        annotation.failures = original.get("failures", [])
        annotation.submitted_answer = None
    if annotation.excluded and annotation.exclusion_reason == REVIEW_EXCLUSION_REASON:
        annotation.excluded = False
        annotation.exclusion_reason = ""


def _review_request_check(
    ids: list[int], decision: Any, reason: Any, rejection_category: Any, answer: Any
) -> tuple[str, str]:
    """The decision, its reason and category, and what a correction needs (one annotation and
    an answer, which no other decision takes) checked before anything is locked; returns the
    reason and the category the review keeps."""
    errors = rules.decision_check(decision)
    if errors:
        raise _refuse(errors, "The review was refused")
    reason_text, category, errors = rules.reason_check(decision, reason, rejection_category)
    if errors:
        raise _refuse(errors, "The review was refused")
    if decision == rules.DECISION_CORRECT and len(ids) != 1:
        raise InvalidInput(
            "annotation_ids: a correction is made to one annotation at a time",
            {"annotation_ids": "one annotation for a correction"},
        )
    if decision != rules.DECISION_CORRECT and answer not in (None, {}):
        raise InvalidInput("answer: only a correction takes an answer", {"answer": "only a correction takes an answer"})
    return reason_text, category


def _annotations_locked(study: Study, ids: list[int]) -> list[Annotation]:
    """The named annotations of the study, locked in id order; an id that is not one of the
    study's is refused (at most twenty named)."""
    annotations = list(
        Annotation.objects.select_for_update().filter(study=study, pk__in=ids).select_related("item").order_by("pk")
    )
    missing = sorted(set(ids) - {a.pk for a in annotations})
    if missing:
        raise NotFound(
            f"annotation_ids: not annotations of study {study.slug}: {', '.join(map(str, missing[:20]))}",
            {"annotation_ids": f"not in this study: {', '.join(map(str, missing[:20]))}"},
        )
    return annotations


def _correction_clean(kind: StudyKind, target: Annotation, answer: Any) -> dict[str, Any]:
    """The reviewer's answer for a correction, cleaned by the kind; only a main-pool annotation
    that holds an answer can take one."""
    if target.source != ROLE_MAIN:
        raise Conflict(
            "Only a main-pool annotation can be corrected: an attention check or qualification answer is graded "
            "against the item's known answer",
            {"annotation_ids": "not a main-pool annotation"},
        )
    if target.broken:
        raise Conflict(
            "The annotator flagged this item broken, so the annotation holds no answer to correct; settle the "
            "item with a gold label instead",
            {"annotation_ids": "flagged broken"},
        )
    return answer_clean(kind=kind, item=target.item, answer=answer)


def _decision_apply(
    a: Annotation, decision: str, cleaned: dict[str, Any] | None, kind: StudyKind, now: datetime
) -> None:
    """The decision written on the annotation: what an earlier one changed put back, then a
    rejection's exclusion or a correction's answer (the annotator's kept in
    ``submitted_answer``), and the decision mirrored in ``review``."""
    _restore(a)
    if decision == rules.DECISION_REJECT and not a.excluded:
        a.excluded = True
        a.exclusion_reason = REVIEW_EXCLUSION_REASON
    if cleaned is not None:
        a.submitted_answer = {"answer": a.answer, "has_failure": a.has_failure, "failures": a.failures}
        a.answer = cleaned
        a.has_failure = kind.has_failure(cleaned)
        a.failures = cleaned.get("failures", [])
    a.review = decision
    a.reviewed_at = now
    a.save(
        update_fields=[
            "answer",
            "has_failure",
            "failures",
            "submitted_answer",
            "excluded",
            "exclusion_reason",
            "review",
            "reviewed_at",
        ]
    )


@transaction.atomic
def annotation_review(
    *,
    study: Study,
    annotation_ids: Any,
    decision: Any,
    reviewer: Any,
    reason: Any = None,
    rejection_category: Any = None,
    answer: Any = None,
) -> list[AnnotationReview]:
    """Record ``decision`` on each of the study's annotations named by ``annotation_ids`` (one
    id or a list of at most ``rules.BULK_MAX``) and return the new review rows. A rejection
    needs ``reason`` (the participant's message, 100 to 2000 characters) and
    ``rejection_category``; a correction takes one annotation and ``answer`` (the kind's
    shape), only of a main-pool annotation that holds an answer (not one flagged "This item is
    broken": settle that item with a gold label). Nothing is stored unless every annotation
    can take the decision."""
    ids = _ids(annotation_ids, "annotation_ids")
    reason_text, category = _review_request_check(ids, decision, reason, rejection_category, answer)
    annotations = _annotations_locked(study, ids)
    cleaned: dict[str, Any] | None = None
    kind = kind_get(study.kind)
    if decision == rules.DECISION_CORRECT:
        cleaned = _correction_clean(kind, annotations[0], answer)
    now = timezone.now()
    reviews = []
    for a in annotations:
        _decision_apply(a, decision, cleaned, kind, now)
        reviews.append(
            AnnotationReview(
                annotation=a,
                study=study,
                decision=decision,
                reason=reason_text,
                rejection_category=category,
                corrected_answer=cleaned,
                reviewer=reviewer if reviewer is not None and getattr(reviewer, "pk", None) else None,
                created_at=now,
            )
        )
    return AnnotationReview.objects.bulk_create(reviews)


def _settled_ids(item: StudyItem, value: Any) -> list[int]:
    """The annotations a gold label settles: those named (each must be an annotation of the
    item), or by default the item's counted annotations by real participants."""
    if value in (None, ""):
        counted = annotations_counted(Annotation.objects.filter(item=item, is_test=False))
        return list(counted.values_list("pk", flat=True))
    ids = _ids(value, "settled")
    known = set(Annotation.objects.filter(item=item, pk__in=ids).values_list("pk", flat=True))
    stray = [i for i in ids if i not in known]
    if stray:
        raise InvalidInput(
            f"settled: not annotations of item {item.item_id}: {', '.join(map(str, stray[:20]))}",
            {"settled": f"not annotations of this item: {', '.join(map(str, stray[:20]))}"},
        )
    return ids


@transaction.atomic
def gold_label_set(*, item: StudyItem, answer: Any, note: Any, adjudicator: Any, settled: Any = None) -> GoldLabel:
    """Settle ``item`` into its gold label: ``answer`` in the kind's shape (cleaned as a submitted
    answer is), ``note`` (required: why), the annotations it settled (``settled``, by default
    the item's counted annotations). A second adjudication replaces the label and keeps the
    earlier version in ``history``."""
    item = StudyItem.objects.select_for_update().select_related("study").get(pk=item.pk)  # one adjudication at a time
    study = item.study
    kind = kind_get(study.kind)
    note_text, errors = rules.note_check(note)
    try:
        cleaned = answer_clean(kind=kind, item=item, answer=answer)
    except InvalidInput as exc:
        if not errors:
            raise
        fields = {**exc.fields, **{e.field: [e.message] for e in errors}}
        raise InvalidInput(f"The gold label was refused: {exc.message}; note: {errors[0].message}", fields) from None
    if errors:
        raise _refuse(errors, "The gold label was refused")
    settled_ids = _settled_ids(item, settled)
    now = timezone.now()
    user = adjudicator if adjudicator is not None and getattr(adjudicator, "pk", None) else None
    gold = GoldLabel.objects.select_for_update().filter(item=item).first()
    if gold is None:
        gold = GoldLabel(item=item, study=study, created_at=now, history=[])
    else:
        gold.history = [
            *gold.history,
            {
                "answer": gold.answer,
                "note": gold.note,
                "adjudicator": gold.adjudicator.get_username() if gold.adjudicator else None,
                "at": gold.updated_at.isoformat(),
                "settled": sorted(gold.settled.values_list("pk", flat=True)),
            },
        ]
    gold.answer = cleaned
    gold.has_failure = kind.has_failure(cleaned)
    gold.note = note_text
    gold.adjudicator = user
    gold.updated_at = now
    gold.save()
    gold.settled.set(settled_ids)
    return gold


@transaction.atomic
def gold_label_delete(*, item: StudyItem) -> None:
    """Take the item's gold label away (its reports go back to the majority alone)."""
    deleted, _ = GoldLabel.objects.filter(item=item).delete()
    if not deleted:
        raise NotFound(f"item {item.item_id} has no gold label")


@transaction.atomic
def gold_qualification_add(*, source: Study, target: Study, qualification_pass: Any = None) -> ItemsAdded:
    """Give ``target`` (a later study of the same kind) the gold-labelled items of ``source`` as
    qualification items: each item as annotators saw it, its known answer the gold label
    (``StudyKind.expected_from_answer``), its explanation the adjudicator's note. Ids are
    ``<source slug>/<item id>``; an item ``target`` already has is skipped, so a repeat adds only
    new gold labels. Refused (409) for a study of another kind, a kind that cannot turn an answer
    into a known answer, no gold label, or a target someone has already entered
    (``study_items_add``).

    The qualification test is then on: a target that had it off gets it turned on, and its pass
    mark is ``qualification_pass`` (1 to the number of qualification items) or, when not given,
    the study's own if it has one, else every qualification item answered as its known answer."""
    if target.pk == source.pk:
        raise InvalidInput(fields={"from_study": "a study's own items cannot be its qualification items"})
    if target.kind != source.kind:
        raise Conflict(
            fields={"from_study": f"{source.slug} is a {source.kind} study; {target.slug} is a {target.kind} study"}
        )
    kind = kind_get(source.kind)
    if kind.expected_from_answer is None:
        raise Conflict(fields={"from_study": f"the {kind.label} kind cannot use a gold label as a known answer"})
    golds = list(GoldLabel.objects.filter(study=source).select_related("item").order_by("item__position", "item_id"))
    if not golds:
        raise Conflict(fields={"from_study": f"{source.slug} has no gold label yet"})
    specs = [
        ItemSpec(
            item_id=f"{source.slug}/{g.item.item_id}",
            topic=g.item.topic,
            goal=g.item.goal,
            reference_steps=list(g.item.reference_steps),
            candidate_steps=list(g.item.candidate_steps),
            role=ROLE_QUALIFICATION,
            expected=kind.gold_expected(g.answer),
            explanation=g.note,
            source={**(g.item.source or {}), "gold_of": {"study": source.slug, "item_id": g.item.item_id}},
        )
        for g in golds
    ]
    added = study_items_add(study=target, items=specs, skip_existing=True)
    n_items = StudyItem.objects.filter(study=target, role=ROLE_QUALIFICATION).count()
    mark = target.qualification_pass or n_items
    if qualification_pass not in (None, ""):
        text = str(qualification_pass).strip()
        if isinstance(qualification_pass, bool) or not text.isdigit() or not 1 <= int(text) <= n_items:
            raise InvalidInput(fields={"qualification_pass": f"a whole number from 1 to {n_items}"})
        mark = int(text)
    Study.objects.filter(pk=target.pk).update(qualification_enabled=True, qualification_pass=min(mark, n_items))
    target.refresh_from_db(fields=["qualification_enabled", "qualification_pass"])
    return added
