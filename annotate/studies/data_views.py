"""The data manager's page (docs/annotation.md, "The data manager"): a study's items with their
annotations, searched, filtered, sorted and paged by the query string; the bulk actions of
data_actions.py on a selection; items added to the running study. Thin: the selectors and
services do the work, and a refusal (a bad parameter, a bad file, an action refused) is
answered by ``core.errors.app_errors``: the page again with the message, at the error's status."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotate.models import Study
from annotate.review.rules import REJECTION_CATEGORIES
from annotate.studies.data_actions import data_action_list, data_action_run
from annotate.studies.data_apis import SELECTION_MAX
from annotate.studies.data_selectors import (
    AGREEMENTS,
    FLAG_ANY,
    FLAG_NONE,
    JUDGE_NONE,
    PAGE_SIZE_MAX,
    SORTS,
    STATUSES,
    DataQuery,
    data_page,
    data_query_clean,
    data_selection,
    study_labels_known,
    study_topics,
)
from annotate.studies.data_services import study_items_add_from_upload, study_round_choices
from annotate.studies.item_sources import judge_names
from annotate.studies.selectors import study_get
from core.app_errors import AppError, InvalidInput
from core.errors import app_errors
from core.permissions import researcher_required
from core.request_bodies import accepts_uploads
from core.roles import is_researcher


def _columns(query: DataQuery, labels: bool) -> list[dict[str, Any]]:
    """The table's sortable columns: each with the link that sorts by it (descending when it is
    the sort already ascending) and the arrow of the current sort."""
    names = {
        "item_id": "Item",
        "topic": "Topic",
        "judge_label": "Judge",
        "disagreement": "Agreement",
        "annotations": "Answers",
        "flags": "Flags",
        "last_submitted": "Last answer",
    }
    columns = []
    for key, title in names.items():
        if key in ("judge_label", "disagreement") and not labels:
            continue
        current = query.sort.lstrip("-") == key
        descending = query.sort.startswith("-")
        target = f"-{key}" if current and not descending else key
        params = {**query.filters(), "sort": target, "page_size": query.page_size}
        columns.append(
            {
                "key": key,
                "title": title,
                "href": "?" + urlencode(params),
                "arrow": ("▼" if descending else "▲") if current else "",
            }
        )
    return columns


def _page_links(query: DataQuery, pages: int) -> dict[str, str]:
    base = {**query.filters(), "sort": query.sort, "page_size": query.page_size}
    links = {}
    if query.page > 1:
        links["previous"] = "?" + urlencode({**base, "page": query.page - 1})
    if query.page < pages:
        links["next"] = "?" + urlencode({**base, "page": query.page + 1})
    return links


def _error_context(error: AppError | None) -> dict[str, Any]:
    """A refusal as the page shows it: its fields with their problems, and its message when it
    says more than they do."""
    if error is None:
        return {"error": None, "error_fields": [], "error_summary": ""}
    fields = list(error.fields.items())
    joined = "; ".join(f"{name}: {'; '.join(problems)}" for name, problems in fields)
    return {"error": error, "error_fields": fields, "error_summary": "" if error.message == joined else error.message}


def _render(request: HttpRequest, study: Study, *, error: AppError | None = None, status: int = 200) -> HttpResponse:
    labels = study_labels_known(study)
    context: dict[str, Any] = {
        "study": study,
        "labels": labels,
        "topics": study_topics(study),
        "statuses": STATUSES,
        "agreements": AGREEMENTS,
        "flag_values": ["broken", "unsure", FLAG_ANY, FLAG_NONE],
        "judge_values": ["has_failure", "no_failure", JUDGE_NONE],
        "sorts": [*SORTS, *(f"-{key}" for key in SORTS)],
        "page_size_max": PAGE_SIZE_MAX,
        "selection_max": SELECTION_MAX,
        "actions": data_action_list(),
        "rounds": study_round_choices(study),
        "judges": judge_names(),
        "rejection_categories": list(REJECTION_CATEGORIES.items()),
        **_error_context(error),
    }
    try:
        query = data_query_clean(study, request.GET)
        page = data_page(study, query)
    except InvalidInput as exc:  # a bad parameter: the page says which, with no table
        status = status if error else exc.status
        context.update({**_error_context(error or exc), "page": None, "query": DataQuery()})
        return render(request, "annotate/study_data.html", context, status=status)
    context.update(
        {
            "query": query,
            "page": page,
            "filters": query.filters(),
            # The bulk form's query: the filters (the selection of "every item matching") and the
            # sort and page size, so that the page comes back as it was.
            "filters_query": urlencode({**query.filters(), "sort": query.sort, "page_size": query.page_size}),
            "columns": _columns(query, labels),
            "links": _page_links(query, page.pages),
        }
    )
    return render(request, "annotate/study_data.html", context, status=status)


def _refused(request: HttpRequest, exc: AppError, slug: str) -> HttpResponse:
    """A refused action or addition: the page again (with the same filters), the message on top."""
    return _render(request, study_get(slug=slug), error=exc, status=exc.status)


@researcher_required
def study_data(request: HttpRequest, slug: str) -> HttpResponse:
    return _render(request, study_get(slug=slug))


@researcher_required
@require_POST
@app_errors(_refused)
def study_data_action(request: HttpRequest, slug: str) -> HttpResponseBase:
    """Run a bulk action on the ticked items (``items``) or, with ``all_matching``, on every item
    matching the page's filters (the query string); back to the page with what it did, or the
    export's download."""
    study = study_get(slug=slug)
    if request.POST.get("all_matching") in ("1", "true", "on"):
        items = data_selection(study, query=data_query_clean(study, request.GET, filters_only=True))
    else:
        ids = request.POST.getlist("items")
        if not ids:
            raise InvalidInput(fields={"items": "tick the items to act on, or choose every item matching the filters"})
        if len(ids) > SELECTION_MAX:
            raise InvalidInput(fields={"items": f"at most {SELECTION_MAX:,} item ids at once"})
        items = data_selection(study, item_ids=ids)
    n_items = items.count()
    result = data_action_run(
        study=study, name=request.POST.get("action", ""), items=items, params=request.POST.dict(), user=request.user
    )
    if result.download is not None:
        response = StreamingHttpResponse(result.download.chunks, content_type=result.download.content_type)
        response["Content-Disposition"] = f'attachment; filename="{result.download.filename}"'
        return response
    messages.success(request, f"{n_items} item(s) selected. {result.message}")
    query = request.GET.urlencode()
    return redirect(reverse("annotate:study_data", args=[slug]) + (f"?{query}" if query else ""))


@accepts_uploads(is_researcher)
@researcher_required
@require_POST
@app_errors(_refused)
def study_data_add_items(request: HttpRequest, slug: str) -> HttpResponse:
    """Add items to the running study from an items file and/or judged generations."""
    study = study_get(slug=slug)
    n_judged = request.POST.get("n_judged", "").strip()
    seed = request.POST.get("seed", "").strip()
    for name, value in (("n_judged", n_judged), ("seed", seed)):
        if value and not value.isdigit():
            raise InvalidInput(fields={name: f"a whole number from {1 if name == 'n_judged' else 0}, got {value!r}"})
    outcome = study_items_add_from_upload(
        study=study,
        upload=request.FILES.get("items_file"),
        judge=request.POST.get("judge", "").strip(),
        n_judged=int(n_judged) if n_judged else None,
        seed=int(seed) if seed else 0,
    )
    messages.success(
        request,
        f"Added {len(outcome.added)} item(s) to {study.name} (round {study.round}); each main item gets "
        f"k = {study.annotators_per_item} annotators.",
    )
    return redirect("annotate:study_data", slug=slug)
