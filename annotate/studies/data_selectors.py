"""Reads of the data manager: one table per study of its items, each with its annotations,
searched, filtered, sorted and paged in the database (docs/annotation.md, "The data manager").

Every filter and sort is a SQL expression (correlated subqueries, ``Exists``, ``Case``), so a
page costs the same whatever the study's size: the database counts the matching items and
returns one page of them, and a second query reads that page's annotations. The page and the
API read the same parameters (``DataQuerySerializer``) through ``data_query_clean``: a bad
value is an ``InvalidInput`` naming the parameter (a 400), never a 500.

The counts follow the study page's rules: a slot toward k is a submitted main-pool assignment
that is not surplus (``study_progress_get``), an answer *counts* when it is not excluded, not
surplus and not flagged broken (``annotations_counted``), test participants count nowhere.
The judge label, the human majority and the agreement columns exist for kinds whose answers
store a has_failure label (``StudyKind.answer_label``); for the others they are absent, and
filtering or sorting on them is refused naming the parameter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Least
from rest_framework import serializers

from annotate import constants as C
from annotate.kinds import kind_get
from annotate.kinds.base import ROLE_MAIN
from annotate.models import Annotation, Assignment, AssignmentStatus, ItemRole, Study, StudyItem
from annotate.participation import clock
from annotate.participation.flags import FLAG_BROKEN, FLAG_UNSURE
from annotate.stats.records import LEFT_OUT_FLAGS
from annotate.studies.api_fields import LABEL_HAS_FAILURE, LABEL_NO_FAILURE
from annotate.studies.selectors import LEFT_OUT_WHERE
from core.app_errors import InvalidInput
from core.query_params import QueryChoice, query_params_clean

# -- the parameters --------------------------------------------------------------------------

PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 200
SEARCH_MAX_CHARS = 200
PAGE_MAX = 10**9

STATUS_OPEN = "open"  # main pool: nothing filled, nothing held
STATUS_IN_PROGRESS = "in_progress"  # below k, started (a filled slot while the study is open, or a live lease)
STATUS_INCOMPLETE = "incomplete"  # a closed study's item below k with a filled slot and no live lease
STATUS_COMPLETE = "complete"  # k slots filled
STATUS_CHECK = "check"  # an attention-check or qualification item (no k)
STATUSES = (STATUS_OPEN, STATUS_IN_PROGRESS, STATUS_INCOMPLETE, STATUS_COMPLETE)

AGREEMENT_UNANIMOUS = "unanimous"  # two or more counted answers, all the same label
AGREEMENT_SPLIT = "split"  # two or more counted answers, not all the same
AGREEMENT_TOO_FEW = "too_few"  # fewer than two counted answers
AGREEMENT_JUDGE_AGREES = "judge_agrees"  # a human majority, equal to the judge's label
AGREEMENT_JUDGE_DISAGREES = "judge_disagrees"  # a human majority, not the judge's label
AGREEMENTS = (
    AGREEMENT_UNANIMOUS,
    AGREEMENT_SPLIT,
    AGREEMENT_TOO_FEW,
    AGREEMENT_JUDGE_AGREES,
    AGREEMENT_JUDGE_DISAGREES,
)

JUDGE_NONE = "none"  # the item has no judge label (a file's item, or a kind without labels)
FLAG_ANY = "any"
FLAG_NONE = "none"
ROLE_ANY = "any"

# A sort key: what the table's header and ``?sort=`` call it, and the ORM ordering it means
# (ascending; ``-key`` reverses it). The item's position breaks every tie, so pages never overlap.
SORTS: dict[str, tuple[str, ...]] = {
    "position": ("role", "position"),
    "item_id": ("item_id",),
    "topic": ("topic", "role", "position"),
    "annotations": ("n_annotations", "role", "position"),
    "counted": ("n_counted", "role", "position"),
    "disagreement": ("n_minority", "n_counted", "role", "position"),
    "flags": ("n_flags", "role", "position"),
    "judge_label": ("judge_label", "role", "position"),
    "last_submitted": ("last_submitted_at", "role", "position"),
}
LABEL_SORTS = {"disagreement", "judge_label"}  # need has_failure labels (the kind's answer_label)
SORT_CHOICES = [*SORTS, *(f"-{key}" for key in SORTS)]


class DataFilterSerializer(serializers.Serializer):
    """The data manager's filters: the table's query parameters and a bulk action's selection
    of "every item matching" (the page and the API read them alike; the schema documents this
    serializer)."""

    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=SEARCH_MAX_CHARS,
        help_text="Search: item_id, goal or topic containing this text (any case)",
    )
    topic = serializers.CharField(
        required=False, allow_blank=True, max_length=100, help_text="Exactly this topic (one of the study's)"
    )
    judge_label = QueryChoice(
        choices=[LABEL_HAS_FAILURE, LABEL_NO_FAILURE, JUDGE_NONE],
        required=False,
        allow_blank=True,
        help_text="The label of the judge the item was sampled from (its source's judge_label); none: no label",
    )
    agreement = QueryChoice(
        choices=list(AGREEMENTS),
        required=False,
        allow_blank=True,
        help_text="unanimous / split (2+ counted answers), too_few (under 2), judge_agrees / judge_disagrees "
        "(a human majority under the study's rule, equal to / different from the judge's label)",
    )
    annotator = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=C.PID_MAX_LENGTH,
        help_text="Items this annotator (PROLIFIC_PID, any case) submitted an answer on",
    )
    status = QueryChoice(
        choices=list(STATUSES),
        required=False,
        allow_blank=True,
        help_text="Main-pool items: open, in_progress, incomplete (closed study) or complete (k slots filled)",
    )
    flag = QueryChoice(
        choices=[FLAG_BROKEN, FLAG_UNSURE, FLAG_ANY, FLAG_NONE],
        required=False,
        allow_blank=True,
        help_text="Items with an answer flagged broken / unsure / either (any), or with none flagged (none)",
    )
    role = QueryChoice(
        choices=[*ItemRole.values, ROLE_ANY],
        required=False,
        default=ROLE_MAIN,
        help_text="main (default), attention, qualification or any",
    )


class DataQuerySerializer(DataFilterSerializer):
    """The table's query parameters: the filters, the sort and the page."""

    sort = QueryChoice(
        choices=SORT_CHOICES,
        required=False,
        default="position",
        help_text="A column, - first for descending: " + ", ".join(SORTS),
    )
    page = serializers.IntegerField(required=False, default=1, min_value=1, max_value=PAGE_MAX, help_text="From 1")
    page_size = serializers.IntegerField(
        required=False,
        default=PAGE_SIZE_DEFAULT,
        min_value=1,
        max_value=PAGE_SIZE_MAX,
        help_text=f"Items per page, 1-{PAGE_SIZE_MAX} (default {PAGE_SIZE_DEFAULT})",
    )


FILTER_NAMES = ("q", "topic", "judge_label", "agreement", "annotator", "status", "flag", "role")


@dataclass(frozen=True)
class DataQuery:
    """A checked data-manager query: the filters (empty: not filtered), the sort, the page."""

    q: str = ""
    topic: str = ""
    judge_label: str = ""
    agreement: str = ""
    annotator: str = ""
    status: str = ""
    flag: str = ""
    role: str = ROLE_MAIN
    sort: str = "position"
    page: int = 1
    page_size: int = PAGE_SIZE_DEFAULT

    def filters(self) -> dict[str, str]:
        """The filters that are set, by name (the page's links and a bulk action's selection)."""
        values = {name: getattr(self, name) for name in FILTER_NAMES}
        return {name: value for name, value in values.items() if value and not (name == "role" and value == ROLE_MAIN)}


def study_labels_known(study: Study) -> bool:
    """Whether the study's kind stores a has_failure label on its answers (its ``answer_label``):
    only then are there judge labels, human majorities and agreement to show."""
    return kind_get(study.kind).answer_label is not None


def data_query_clean(study: Study, params: Any, *, filters_only: bool = False) -> DataQuery:
    """The query ``params`` ask for (``request.GET``, ``request.query_params`` or a dict),
    checked: a value outside its choices, a page or page size that is not a whole number in
    range, a topic no item of the study has, an annotator who has no answer in it, or a filter
    or sort on labels in a study whose kind has none is an ``InvalidInput`` naming the
    parameter. ``filters_only``: the filters alone (a bulk action's selection; a sort or page
    sent with them is not read)."""
    values = query_params_clean(DataFilterSerializer if filters_only else DataQuerySerializer, params)
    query = DataQuery(**{name: values[name] for name in values if values[name] is not None})
    problems: dict[str, str] = {}
    if not study_labels_known(study):
        label = kind_get(study.kind).label
        for name in ("judge_label", "agreement"):
            if getattr(query, name):
                problems[name] = f"a {label} study's answers have no has_failure label to filter on"
        if query.sort.lstrip("-") in LABEL_SORTS:
            problems["sort"] = f"a {label} study's answers have no has_failure label to sort on"
    if query.topic and not StudyItem.objects.filter(study=study, topic=query.topic).exists():
        topics = study_topics(study)
        shown = ", ".join(repr(t) for t in topics[:20]) + (" ..." if len(topics) > 20 else "")
        problems["topic"] = f"no item of this study has the topic {query.topic!r}; its topics: {shown or 'none'}"
    if query.annotator and not Annotation.objects.filter(study=study, annotator__pid=query.annotator.lower()).exists():
        problems["annotator"] = f"no answer in this study is by {query.annotator!r}"
    if problems:
        raise InvalidInput(fields=problems)
    return query


def study_topics(study: Study) -> list[str]:
    """The study's topics, in order (the page's topic filter offers them)."""
    topics = StudyItem.objects.filter(study=study).exclude(topic="").order_by("topic").values_list("topic", flat=True)
    return list(topics.distinct())


# -- the rows --------------------------------------------------------------------------------


def _count(queryset: QuerySet, field: str = "item") -> Coalesce:
    """Rows of ``queryset`` (filtered on ``item=OuterRef("pk")``) per item, as a correlated
    subquery; 0 when there are none."""
    counts = queryset.order_by().values(field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


def _prefixed(condition: Q, prefix: str) -> Q:
    """``condition`` on a related model's fields, named through ``prefix`` (``annotations__``)."""
    copy = Q()
    copy.connector, copy.negated = condition.connector, condition.negated
    children: list[Any] = []
    for child in condition.children:
        if isinstance(child, Q):
            children.append(_prefixed(child, prefix))
        else:  # a (lookup, value) pair
            lookup, value = cast("tuple[str, Any]", child)
            children.append((prefix + lookup, value))
    copy.children = children
    return copy


def _counted_where(prefix: str) -> Q:
    """``annotations_counted``'s rule (none of ``LEFT_OUT_FLAGS``, each as ``LEFT_OUT_WHERE``
    states it) as a condition on the annotations joined through ``prefix``, for a count
    grouped per item."""
    left_out = Q()
    for flag in LEFT_OUT_FLAGS:
        left_out |= LEFT_OUT_WHERE[flag]
    return ~_prefixed(left_out, prefix)


def _aggregated(study: Study) -> QuerySet[Any]:
    """The study's items, each with its answers counted in one grouped join (one pass over the
    study's annotations, whatever the filter or sort): ``n_annotations`` (submitted, test
    participants' aside), ``n_counted`` (those that count, ``annotations_counted``),
    ``n_has_failure`` (counted answers saying has_failure), ``n_minority`` (the smaller side of
    the counted labels: 0 when unanimous), ``n_excluded``, ``n_broken``, ``n_unsure``,
    ``n_flags``, ``n_filled`` (slots toward k: main-pool answers that are not surplus, the
    answers of the submitted assignments that count toward k), ``last_submitted_at`` and
    ``judge_label``."""
    mine = Q(annotations__is_test=False)
    counted = mine & Q(annotations__source=ROLE_MAIN) & _counted_where("annotations__")
    # QuerySet[Any]: the rows carry the annotations below, which the model's type does not know.
    rows: QuerySet[Any] = StudyItem.objects.filter(study=study).annotate(
        n_annotations=Count("annotations", filter=mine),
        n_counted=Count("annotations", filter=counted),
        n_has_failure=Count("annotations", filter=counted & Q(annotations__has_failure=True)),
        n_excluded=Count("annotations", filter=mine & Q(annotations__excluded=True)),
        n_broken=Count("annotations", filter=mine & Q(annotations__flag=FLAG_BROKEN)),
        n_unsure=Count("annotations", filter=mine & Q(annotations__flag=FLAG_UNSURE)),
        n_filled=Count("annotations", filter=mine & Q(annotations__source=ROLE_MAIN, annotations__surplus=False)),
        last_submitted_at=Max("annotations__submitted_at", filter=mine),
        # The label as text (a plain column for the filter's equality, not a JSON comparison).
        judge_label=Cast(KeyTextTransform("judge_label", "source"), output_field=CharField()),
    )
    return rows.annotate(
        n_flags=F("n_broken") + F("n_unsure"),
        n_minority=Least(F("n_has_failure"), F("n_counted") - F("n_has_failure")),
    )


def _with_status(study: Study, rows: QuerySet[Any]) -> QuerySet[Any]:
    """``rows`` with ``n_live`` (unexpired reservations of real participants, one correlated
    count per row: asked for only where the status is filtered on or shown) and ``status``, the
    study page's partition of the main pool (``study_progress_get``)."""
    live = Assignment.objects.filter(
        item=OuterRef("pk"), status=AssignmentStatus.RESERVED, lease_expires_at__gt=clock.now(), is_test=False
    )
    return rows.annotate(n_live=_count(live)).annotate(
        status=Case(
            When(~Q(role=ROLE_MAIN), then=Value(STATUS_CHECK)),
            When(n_filled__gte=study.annotators_per_item, then=Value(STATUS_COMPLETE)),
            When(n_live__gt=0, then=Value(STATUS_IN_PROGRESS)),
            When(n_filled__gt=0, then=Value(STATUS_IN_PROGRESS if study.is_open else STATUS_INCOMPLETE)),
            default=Value(STATUS_OPEN),
            output_field=CharField(),
        ),
    )


def data_rows(study: Study, query: DataQuery) -> QuerySet[Any]:
    """The study's items matching ``query``'s filters, in its sort order, with the counts of
    ``_aggregated`` (and ``n_live`` and ``status`` when the status is filtered on)."""
    rows = _aggregated(study)
    if query.status:
        rows = _with_status(study, rows)
    rows = _filtered(study, rows, query)
    ordering = [f"-{name}" if query.sort.startswith("-") else name for name in SORTS[query.sort.lstrip("-")]]
    return rows.order_by(*ordering, "pk" if not query.sort.startswith("-") else "-pk")


def _filtered(study: Study, rows: QuerySet[Any], query: DataQuery) -> QuerySet[Any]:
    if query.role != ROLE_ANY:
        rows = rows.filter(role=query.role)
    if query.q:
        rows = rows.filter(Q(item_id__icontains=query.q) | Q(goal__icontains=query.q) | Q(topic__icontains=query.q))
    if query.topic:
        rows = rows.filter(topic=query.topic)
    if query.judge_label == JUDGE_NONE:
        rows = rows.filter(judge_label__isnull=True)
    elif query.judge_label:
        rows = rows.filter(judge_label=query.judge_label)
    if query.annotator:
        rows = rows.filter(
            Exists(
                Annotation.objects.filter(item=OuterRef("pk"), is_test=False, annotator__pid=query.annotator.lower())
            )
        )
    if query.status:
        rows = rows.filter(status=query.status)
    if query.flag:
        flagged = Annotation.objects.filter(item=OuterRef("pk"), is_test=False)
        if query.flag in (FLAG_BROKEN, FLAG_UNSURE):
            rows = rows.filter(Exists(flagged.filter(flag=query.flag)))
        elif query.flag == FLAG_ANY:
            rows = rows.filter(Exists(flagged.exclude(flag="")))
        else:
            rows = rows.exclude(Exists(flagged.exclude(flag="")))
    if query.agreement:
        rows = rows.filter(_agreement_where(study, query.agreement))
    return rows


def _agreement_where(study: Study, agreement: str) -> Q:
    """The condition of an agreement filter. The human majority is the agreement report's
    (``annotate.stats.majority.human_majority``): at least ``min_annotations_for_majority``
    counted answers and a strict majority of one label."""
    if agreement == AGREEMENT_TOO_FEW:
        return Q(n_counted__lt=2)
    if agreement == AGREEMENT_UNANIMOUS:
        return Q(n_counted__gte=2, n_minority=0)
    if agreement == AGREEMENT_SPLIT:
        return Q(n_counted__gte=2, n_minority__gt=0)
    decided = Q(n_counted__gte=study.min_annotations_for_majority) & ~Q(n_has_failure=F("n_counted") / 2.0)
    says_failure = Q(n_has_failure__gt=F("n_counted") / 2.0)
    majority_has = decided & says_failure
    majority_no = decided & ~says_failure
    agrees = (majority_has & Q(judge_label=LABEL_HAS_FAILURE)) | (majority_no & Q(judge_label=LABEL_NO_FAILURE))
    if agreement == AGREEMENT_JUDGE_AGREES:
        return agrees
    return decided & Q(judge_label__in=[LABEL_HAS_FAILURE, LABEL_NO_FAILURE]) & ~agrees


@dataclass
class DataPage:
    """One page of the table: its rows (items with their counts and ``answers``), how many
    items match in all, and the query it answers."""

    query: DataQuery
    count: int
    rows: list[Any]
    labels: bool  # the kind stores has_failure labels: the label columns apply

    @property
    def pages(self) -> int:
        return max(1, -(-self.count // self.query.page_size))


def data_page(study: Study, query: DataQuery) -> DataPage:
    """One page of ``data_rows``: the matching items counted, the page's items read with their
    annotations (oldest first; test participants' aside), each row given ``majority``
    (has_failure / no_failure / None under the study's rule), ``agreement`` and ``answers``. A
    page past the last is an ``InvalidInput`` naming ``page``."""
    rows = data_rows(study, query)
    count = rows.count()
    pages = max(1, -(-count // query.page_size))
    if query.page > pages:
        raise InvalidInput(fields={"page": f"there {'is' if pages == 1 else 'are'} {pages} page(s) of {count} item(s)"})
    start = (query.page - 1) * query.page_size
    # The page's ids first (the filter and sort need only the grouped counts), then those items
    # with everything a row shows: the rows skipped before the page cost no more than that.
    ids = list(rows.values_list("pk", flat=True)[start : start + query.page_size])
    found = {i.pk: i for i in _with_status(study, _aggregated(study).filter(pk__in=ids))}
    items: list[Any] = [found[pk] for pk in ids]
    answers: dict[int, list[Annotation]] = {i.pk: [] for i in items}
    for a in (
        Annotation.objects.filter(item__in=list(answers), is_test=False)
        .select_related("annotator", "study")  # the study's kind summarizes each answer (label)
        .order_by("submitted_at", "pk")
    ):
        answers[a.item_id].append(a)
    labels = study_labels_known(study)
    for i in items:
        i.answers = answers[i.pk]
        i.majority = _majority(study, i) if labels else None
        i.agreement = _agreement(i) if labels else None
    return DataPage(query=query, count=count, rows=items, labels=labels)


def _majority(study: Study, item: Any) -> str | None:
    n, yes = item.n_counted, item.n_has_failure
    if n < study.min_annotations_for_majority or 2 * yes == n:
        return None
    return LABEL_HAS_FAILURE if 2 * yes > n else LABEL_NO_FAILURE


def _agreement(item: Any) -> str:
    if item.n_counted < 2:
        return AGREEMENT_TOO_FEW
    return AGREEMENT_UNANIMOUS if item.n_minority == 0 else AGREEMENT_SPLIT


def data_selection(
    study: Study, *, item_ids: list[str] | None = None, query: DataQuery | None = None
) -> QuerySet[StudyItem]:
    """The items a bulk action applies to: those named by ``item_ids`` (each must be the
    study's: an unknown one is an ``InvalidInput`` naming ``items``), or every item matching
    ``query``'s filters (its sort and page do not matter)."""
    if item_ids is not None:
        found = set(StudyItem.objects.filter(study=study, item_id__in=item_ids).values_list("item_id", flat=True))
        unknown = [i for i in dict.fromkeys(item_ids) if i not in found]
        if unknown:
            shown = ", ".join(repr(i) for i in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            raise InvalidInput(fields={"items": f"{len(unknown)} item id(s) are not this study's: {shown}"})
        return StudyItem.objects.filter(study=study, item_id__in=item_ids)
    assert query is not None
    return StudyItem.objects.filter(pk__in=data_rows(study, query).order_by().values("pk"))
