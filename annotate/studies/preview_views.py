"""Preview: a researcher walks a study's annotator path (consent, training, qualification and
item pages of every kind) exactly as an annotator sees it, and nothing is stored.

No participation, assignment, annotation or any other row is created. What a real page
records on the server (when the item was shown, which steps were opened, the goal
acknowledgement) is kept for the current page only in the researcher's own session, so that
a submit is checked by the same rules as an annotator's (``annotation_submit_preview``):
a refused submit shows what would be refused, an accepted one moves on, and both are
dropped. A banner on every page says so (docs/annotation.md, "Preview")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_POST

from annotate import constants as C
from annotate.errors import AnnotateError
from annotate.kinds import codebook_get, kind_get
from annotate.kinds.base import ROLE_ATTENTION, ROLE_MAIN, ROLE_QUALIFICATION, StudyKind
from annotate.models import Study, StudyItem
from annotate.participation import attention_plan
from annotate.participation.item_views import flag_context, item_context
from annotate.participation.responses import annotate_errors, json_body
from annotate.participation.selectors import study_items_per_participant, study_terms
from annotate.participation.services import training_examples
from annotate.participation.submissions import annotation_submit_preview, assignment_save_preview, preview_assignment
from annotate.studies.selectors import study_get, study_item_counts
from core.permissions import researcher_required

# The preview's attention-check plan (positions and order of checks), the same for every preview.
PREVIEW_SEED = 0


def _session_key(study: Study) -> str:
    return f"annotate:preview:{study.slug}"


def _exit_url(study: Study) -> str:
    return reverse("annotate:study_detail", args=[study.slug])


def _preview(study: Study, skip_url: str | None = None) -> dict[str, Any]:
    return {"exit_url": _exit_url(study), "skip_url": skip_url}


def _n_qualification(study: Study) -> int:
    return study_item_counts(study)[ROLE_QUALIFICATION] if study.qualification_enabled else 0


def _sequence_length(study: Study) -> int:
    """Pages of items in the preview: the qualification items, then the items an annotator
    with the preview's plan is given (``study_items_per_participant``)."""
    return _n_qualification(study) + study_items_per_participant(study, seed=PREVIEW_SEED)


def _items_at(study: Study, number: int, count: int) -> list[tuple[int, StudyItem]]:
    """Up to ``count`` items from position ``number`` (1-based) of the preview's sequence, with
    their numbers: qualification items in study order, then main items in study order with
    attention checks where the preview's plan puts them (``attention_plan``), as
    ``assignment_next`` serves them to a participant when every item has a free slot."""
    n_qual = _n_qualification(study)
    total = _sequence_length(study)
    wanted = [n for n in range(max(number, 1), min(number + count, total + 1))]
    if not wanted:
        return []
    out: list[tuple[int, StudyItem]] = []
    quals = [n for n in wanted if n <= n_qual]
    if quals:
        rows = list(
            StudyItem.objects.filter(study=study, role=ROLE_QUALIFICATION).order_by("position", "pk")[
                quals[0] - 1 : quals[-1]
            ]
        )
        out += list(zip(quals, rows))
    rest = [n for n in wanted if n > n_qual]
    if rest:
        # The roles of the sequence up to the last wanted position (main item index or check index).
        checks = attention_plan.check_order(
            PREVIEW_SEED,
            list(
                StudyItem.objects.filter(study=study, role=ROLE_ATTENTION)
                .order_by("position", "pk")
                .values_list("pk", flat=True)
            ),
        )
        n_main = study_item_counts(study)[ROLE_MAIN]
        plan: list[tuple[str, int]] = []
        served = checks_served = main_served = 0
        while served < rest[-1] - n_qual:
            if checks_served < len(checks) and attention_plan.check_due(
                PREVIEW_SEED, study.attention_check_rate, served=served, checks_served=checks_served
            ):
                plan.append((ROLE_ATTENTION, checks_served))
                checks_served += 1
            elif main_served < n_main:
                plan.append((ROLE_MAIN, main_served))
                main_served += 1
            else:
                break
            served += 1
        main_rows = StudyItem.objects.filter(study=study, role=ROLE_MAIN).order_by("position", "pk")
        for n in rest:
            index = n - n_qual - 1
            if index >= len(plan):
                break
            role, k = plan[index]
            item = (
                StudyItem.objects.filter(pk=checks[k]).first()
                if role == ROLE_ATTENTION
                else main_rows[k : k + 1].first()
            )
            if item is not None:
                out.append((n, item))
    return out


def _position(study: Study, number: int, size: int) -> dict[str, Any]:
    n_qual = _n_qualification(study)
    if number <= n_qual:
        return {"number": number, "last": number + size - 1, "total": n_qual, "qualification": True}
    return {
        "number": number - n_qual,
        "last": number - n_qual + size - 1,
        "total": study_items_per_participant(study, seed=PREVIEW_SEED),
        "qualification": False,
    }


def _page_url(study: Study, number: int) -> str:
    if number > _sequence_length(study):
        return reverse("annotate:preview_done", args=[study.slug])
    return reverse("annotate:preview_item", args=[study.slug, number])


def _after_training_url(study: Study) -> str:
    return _page_url(study, 1)


@researcher_required
@require_http_methods(["GET", "POST"])
def preview_consent(request: HttpRequest, slug: str) -> HttpResponse:
    """The consent page with the study's terms (the preview's plan: seed 0)."""
    study = study_get(slug=slug)
    context = {"study": study, "terms": study_terms(study), "preview": _preview(study)}
    if request.method == "POST":
        if request.POST.get("agree") != "yes":
            context["error"] = "Tick the box to confirm you have read the guidelines and agree to take part."
            return render(request, "annotate/consent.html", context, status=400)
        if study.training_enabled and training_examples(study):
            return redirect("annotate:preview_training", slug=slug)
        return redirect(_after_training_url(study))
    return render(request, "annotate/consent.html", context)


@researcher_required
@require_http_methods(["GET", "POST"])
def preview_training(request: HttpRequest, slug: str, index: int | None = None) -> HttpResponse:
    """The codebook and its examples; a check answer shows whether it was right, unrecorded."""
    study = study_get(slug=slug)
    examples = training_examples(study)
    if not examples:
        return redirect(_after_training_url(study))
    intro_url = reverse("annotate:preview_training", args=[slug])
    if index is None:
        return render(
            request,
            "annotate/training_intro.html",
            {
                "study": study,
                "codebook": codebook_get(study.kind) or {},
                "n_examples": len(examples),
                "position": 0,
                "next_number": 1,
                "example_url": reverse("annotate:preview_training_example", args=[slug, 1]),
                "preview": _preview(study, skip_url=_after_training_url(study)),
            },
        )
    if not 1 <= index <= len(examples):
        return redirect("annotate:preview_training_example", slug=slug, index=1)
    example = examples[index - 1]
    is_last = index == len(examples)
    next_url = (
        _after_training_url(study) if is_last else reverse("annotate:preview_training_example", args=[slug, index + 1])
    )
    context = {
        "study": study,
        "example": example,
        "number": index,
        "total": len(examples),
        "intro_url": intro_url,
        "is_last": is_last,
        "next_url": next_url,
        "preview": _preview(study, skip_url=next_url),
    }
    if request.method == "POST":
        choice = request.POST.get("answer")
        if choice not in ("critical", "acceptable"):
            return render(
                request,
                "annotate/training_example.html",
                {**context, "error": "Choose one answer before checking."},
                status=400,
            )
        context["result"] = {"correct": (choice == "critical") == bool(example["is_critical"])}
        context["answered"] = True
    return render(request, "annotate/training_example.html", context)


def _state(request: HttpRequest, study: Study) -> dict[str, Any]:
    state = request.session.get(_session_key(study))
    return state if isinstance(state, dict) else {}


def _served_at(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return timezone.now()


@researcher_required
@ensure_csrf_cookie
@require_http_methods(["GET"])
def preview_item(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """Page ``number`` of the preview: one item, or a page of multiple-choice items."""
    study = study_get(slug=slug)
    kind = kind_get(study.kind)
    n_qual = _n_qualification(study)
    size = study.items_per_page if kind.page_template is not None and number > n_qual else 1
    if number < 1:
        return redirect("annotate:preview_item", slug=slug, number=1)
    entries = _items_at(study, number, size)
    if not entries:
        return redirect("annotate:preview_done", slug=slug)
    # A page of main items never runs into the qualification items, nor the reverse.
    entries = [(n, item) for n, item in entries if (n <= n_qual) == (number <= n_qual)]
    now = timezone.now()
    # This page's server-side record, kept in the researcher's session (only the current page).
    request.session[_session_key(study)] = {
        "number": number,
        "served_at": now.isoformat(),
        "items": {str(n): {"opened": {}, "goal": None} for n, _ in entries},
    }
    next_url = _page_url(study, entries[-1][0] + 1)
    shown = {
        "in_qualification": number <= n_qual,
        "position": _position(study, number, len(entries)),
        "preview": _preview(study, skip_url=next_url),
    }
    if kind.page_template is not None:
        response = _items_page(
            request, study, kind, kind.page_template, entries, now=now, shown=shown, next_url=next_url
        )
    else:
        response = _one_item_page(request, study, entries[0], now=now, shown=shown)
    response["Cache-Control"] = "no-store"
    return response


def _items_page(
    request: HttpRequest,
    study: Study,
    kind: StudyKind,
    template: str,
    entries: list[tuple[int, StudyItem]],
    *,
    now: datetime,
    shown: dict[str, Any],
    next_url: str,
) -> HttpResponse:
    """A preview page of a kind's own (``template``, its ``page_template``): its items, each
    with its preview assignment, the kind's item context and its page state."""
    items, states = [], []
    for k, (n, item) in enumerate(entries, start=1):
        a = preview_assignment(item=item, served_at=now)
        items.append(
            {
                "assignment": a,
                "item": item,
                "number": k,
                **(kind.item_context(item) if kind.item_context is not None else {}),
            }
        )
        states.append(
            {
                "assignment": f"preview-{study.slug}-{n}",
                "saveUrl": reverse("annotate:preview_save", args=[study.slug, n]),
                "submitUrl": reverse("annotate:preview_submit", args=[study.slug, n]),
                "draft": {},
                "draftSeq": 0,
                "elapsedSeconds": 0.0,
            }
        )
    return render(
        request,
        template,
        {
            "study": study,
            "items": items,
            "in_qualification": shown["in_qualification"],
            "guidance": kind.page_guidance,
            "position": shown["position"],
            "preview": shown["preview"],
            "page_state": {
                "items": states,
                "minSeconds": study.min_seconds,
                "autosaveSeconds": C.AUTOSAVE_SECONDS,
                "interfaceVersion": kind.interface_version,
                "nextUrl": next_url,
            },
            **flag_context(),
        },
    )


def _one_item_page(
    request: HttpRequest, study: Study, entry: tuple[int, StudyItem], *, now: datetime, shown: dict[str, Any]
) -> HttpResponse:
    """A preview page of the shared one-item page (annotate/item.html), its page state
    pointing at the preview's save and submit."""
    n, item = entry
    a = preview_assignment(item=item, served_at=now)
    context = item_context(study, None, a)
    context["page_state"].update(
        {
            "assignment": f"preview-{study.slug}-{n}",
            "saveUrl": reverse("annotate:preview_save", args=[study.slug, n]),
            "submitUrl": reverse("annotate:preview_submit", args=[study.slug, n]),
            "elapsedSeconds": 0.0,
        }
    )
    context.update(shown)
    return render(request, "annotate/item.html", context)


def _preview_item_state(
    request: HttpRequest, study: Study, number: int
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    state = _state(request, study)
    items = state.get("items")
    if not isinstance(items, dict) or str(number) not in items:
        return None
    return state, items[str(number)]


def _not_on_page() -> JsonResponse:
    return JsonResponse(
        {"ok": False, "message": "This preview page is no longer open; reload it to preview the item again."},
        status=409,
    )


def _assignment_for(study: Study, number: int, state: dict[str, Any], record: dict[str, Any]):
    entries = _items_at(study, number, 1)
    if not entries:
        return None
    goal = record.get("goal")
    return preview_assignment(
        item=entries[0][1],
        served_at=_served_at(state.get("served_at")),
        steps_opened=record.get("opened") or {},
        goal_acknowledged_at=_served_at(goal) if goal else None,
    )


def _posted_page(request: HttpRequest, study: Study, number: int):
    """What a save or submit on preview page ``number`` acts on: the page's record in the
    session, the JSON body and the unsaved assignment standing for it; or the answer to send
    instead (409 when the page is no longer open, 400 naming a field of a bad body)."""
    found = _preview_item_state(request, study, number)
    if found is None:
        return _not_on_page()
    state, record = found
    body = json_body(request)
    if isinstance(body, JsonResponse):
        return body
    a = _assignment_for(study, number, state, record)
    if a is None:
        return _not_on_page()
    return record, body, a


@researcher_required
@require_POST
@annotate_errors(json=True)
def preview_save(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    """A save checked as an annotator's (400 naming the field); what it records (steps
    opened, the goal box) is kept for this page in the session, the draft is dropped."""
    study = study_get(slug=slug)
    opened = _posted_page(request, study, number)
    if isinstance(opened, JsonResponse):
        return opened
    record, body, a = opened
    a = assignment_save_preview(
        assignment=a,
        draft=body.get("draft"),
        seq=body.get("seq"),
        events=body.get("events"),
        active_ms=body.get("active_ms", 0),
    )
    record["opened"] = dict(a.steps_opened)
    record["goal"] = a.goal_acknowledged_at.isoformat() if a.goal_acknowledged_at else None
    request.session.modified = True
    return JsonResponse(
        {
            "ok": True,
            "preview": True,
            "draft_saved": False,
            "seq": body.get("seq") or 0,
            "steps_opened": len(a.steps_opened),
            "goal_acknowledged": a.goal_acknowledged_at is not None,
        }
    )


@researcher_required
@require_POST
@annotate_errors(json=True)
def preview_submit(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    """A submit checked by the same rules as an annotator's: refused with the same problems, or
    accepted and dropped, moving on to the next page."""
    study = study_get(slug=slug)
    opened = _posted_page(request, study, number)
    if isinstance(opened, JsonResponse):
        return opened
    _record, body, a = opened
    try:
        result = annotation_submit_preview(
            assignment=a, answer=body.get("answer"), submission_id=body.get("submission_id") or ""
        )
    except AnnotateError as exc:
        # The annotator's own message, said to be what would happen (the page shows it as it
        # would to them; the banner's "Skip to the next page" moves on anyway).
        exc.message = f"Preview: an annotator's submit would be refused here. {exc.message}"
        raise
    return JsonResponse(
        {
            "ok": True,
            "preview": True,
            "created": False,
            "correct": result["correct"],
            "next": _page_url(study, number + 1),
        }
    )


@researcher_required
@require_http_methods(["GET"])
def preview_done(request: HttpRequest, slug: str) -> HttpResponse:
    """The completion page an annotator reaches, with the study's completion code (no redirect)."""
    study = study_get(slug=slug)
    request.session.pop(_session_key(study), None)
    return render(
        request,
        "annotate/done.html",
        {
            "study": study,
            "p": {"state": "completed"},
            "code": study.completion_code,
            "redirect_url": None,
            "preview": _preview(study),
        },
    )
