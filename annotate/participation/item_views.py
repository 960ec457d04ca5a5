"""The annotation page (one item, or a page of items for kinds that show several) and the JSON
endpoints it calls: save (draft, events, active time) and submit. Thin, as the other annotator
views (views.py): every rule lives in the services, and their errors become answers in one
decorator (responses.py)."""

from datetime import datetime
from typing import Any, cast

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_POST

from annotate import constants as C
from annotate.kinds import codebook_get, kind_get
from annotate.models import Participation, ParticipationState, Study
from annotate.participation.drafts import assignment_save
from annotate.participation.flags import BROKEN_REASONS, FLAG_NOTE_MAX_LENGTH
from annotate.participation.reservations import assignment_next, assignment_page
from annotate.participation.responses import annotate_errors, json_body, study_full_page
from annotate.participation.selectors import participation_for_session, participation_position
from annotate.participation.submissions import annotation_submit
from annotate.participation.views import SESSION_ENDED, route, session_key, session_participation


def flag_context() -> dict[str, Any]:
    """What "This item is broken" / "I'm unsure" (annotate/_item_flags.html) needs, on the
    one-item page and on every item of a page of several (its preview too)."""
    return {"flag_reasons": list(BROKEN_REASONS.items()), "flag_note_max": FLAG_NOTE_MAX_LENGTH}


def item_context(study: Study, p: Participation | None, a: Any) -> dict[str, Any]:
    """The item page's context; ``p`` None for a researcher's preview (annotate/studies/preview_views.py)."""
    from django.utils import timezone

    kind = kind_get(study.kind)
    item = a.item
    elapsed = max(0.0, (timezone.now() - a.first_served_at).total_seconds())
    page_state = {
        "assignment": str(a.public_id),
        "saveUrl": reverse("annotate:save", args=[study.slug, a.public_id]),
        "submitUrl": reverse("annotate:submit", args=[study.slug, a.public_id]),
        "draft": a.draft or {},
        "draftSeq": a.draft_seq,
        "stepsOpened": sorted(a.steps_opened),
        "goalAcknowledged": a.goal_acknowledged_at is not None,
        "elapsedSeconds": elapsed,
        "minSeconds": study.min_seconds,
        "nL1": len(item.reference_steps),
        "nL2": len(item.candidate_steps),
        "autosaveSeconds": C.AUTOSAVE_SECONDS,
        "interfaceVersion": kind.interface_version,
    }
    return {
        "study": study,
        "p": p,
        "assignment": a,
        "item": item,
        "kind_template": kind.item_template,
        "l1": list(enumerate(item.reference_steps, start=1)),
        "l2": list(enumerate(item.candidate_steps, start=1)),
        "codebook": codebook_get(study.kind) or {},
        "page_state": page_state,
        "in_qualification": p is not None and p.state == ParticipationState.QUALIFICATION,
        "kind_script": kind.item_script,
        "shortcuts_template": kind.shortcuts_template,
        "kind_context": kind.item_context(item) if kind.item_context is not None else {},
        "position": participation_position(p, a.role) if p is not None else None,
        **flag_context(),
    }


@login_not_required
@ensure_csrf_cookie  # the page's script sends the token with every save and submit
@require_http_methods(["GET"])
def work(request: HttpRequest, slug: str) -> HttpResponse:
    """The annotator's current item (qualification items first, then the main pool)."""
    loaded = session_participation(request, slug)
    if isinstance(loaded, HttpResponse):
        return loaded
    study, p = loaded
    if p.state not in (ParticipationState.QUALIFICATION, ParticipationState.ANNOTATING):
        return redirect(route(p))
    kind = kind_get(study.kind)
    if kind.page_template is not None:
        return _work_page(request, study, p, kind)
    a = assignment_next(participation=p)
    p.refresh_from_db()
    if a is None:
        return _nothing_left(request, study, p)
    response = render(request, "annotate/item.html", item_context(study, p, a))
    response["Cache-Control"] = "no-store"
    return response


def _nothing_left(request: HttpRequest, study: Study, p: Participation) -> HttpResponse:
    """No item for the participant: finished (completed, screened out) goes to its page; still
    annotating means they have annotated nothing and no item is left for them
    (``assignment_next``): the study-full page, with no completion code."""
    if p.state == ParticipationState.ANNOTATING:
        return study_full_page(request, study, p)
    return redirect(route(p))


def _work_page(request: HttpRequest, study: Study, p: Participation, kind: Any) -> HttpResponse:
    """A page of one or more items (the study's items per page) for a kind with its own page
    template (multiple choice), each saved and submitted on its own by the page script; each
    item's entry carries what the kind's ``item_context`` adds (its options, its task)."""
    from django.utils import timezone

    page = assignment_page(participation=p, size=study.items_per_page)
    p.refresh_from_db()
    if not page:
        return _nothing_left(request, study, p)
    now = timezone.now()
    items = []
    for number, a in enumerate(page, start=1):
        items.append(
            {
                "assignment": a,
                "item": a.item,
                "number": number,
                **(kind.item_context(a.item) if kind.item_context is not None else {}),
            }
        )
    page_state = {
        "items": [
            {
                "assignment": str(a.public_id),
                "saveUrl": reverse("annotate:save", args=[study.slug, a.public_id]),
                "submitUrl": reverse("annotate:submit", args=[study.slug, a.public_id]),
                "draft": a.draft or {},
                "draftSeq": a.draft_seq,
                # Set when the assignment was reserved (every assignment of the page is reserved).
                "elapsedSeconds": max(0.0, (now - cast(datetime, a.first_served_at)).total_seconds()),
            }
            for a in page
        ],
        "minSeconds": study.min_seconds,
        "autosaveSeconds": C.AUTOSAVE_SECONDS,
        "interfaceVersion": kind.interface_version,
        "nextUrl": reverse("annotate:work", args=[study.slug]),
    }
    response = render(
        request,
        kind.page_template,
        {
            "study": study,
            "p": p,
            "items": items,
            "page_state": page_state,
            "in_qualification": p.state == ParticipationState.QUALIFICATION,
            "guidance": kind.page_guidance,
            "position": _page_position(participation_position(p, page[0].role), len(page)),
            **flag_context(),
        },
    )
    response["Cache-Control"] = "no-store"
    return response


def _page_position(position: dict[str, Any], size: int) -> dict[str, Any]:
    """A page of ``size`` items numbered from ``position["number"]``: its last number too."""
    last = position["number"] + size - 1
    return {**position, "last": last, "total": max(position["total"], last)}


def _json_load(request: HttpRequest, slug: str) -> tuple[Study, Participation] | JsonResponse:
    """One query: the participation in the session, with its study (autosaves are frequent)."""
    p = participation_for_session(slug=slug, participation_id=request.session.get(session_key(slug)))
    if p is None:
        return JsonResponse({"ok": False, "message": SESSION_ENDED}, status=403)
    return p.study, p


@login_not_required
@require_POST
@annotate_errors(json=True)
def save(request: HttpRequest, slug: str, public_id: str) -> JsonResponse:
    """Autosave: ``{"draft": {...}, "seq": n, "events": [...], "active_ms": n}``. The most frequent
    request: the participation id from the session goes straight into the assignment lookup,
    which answers 404 unless the assignment is theirs."""
    participation_id = request.session.get(session_key(slug))
    if not isinstance(participation_id, int):
        return JsonResponse({"ok": False, "message": SESSION_ENDED}, status=403)
    body = json_body(request)
    if isinstance(body, JsonResponse):
        return body
    result = assignment_save(
        participation=participation_id,
        public_id=public_id,
        draft=body.get("draft"),
        seq=body.get("seq"),
        events=body.get("events"),
        active_ms=body.get("active_ms", 0),
    )
    a = result.assignment
    return JsonResponse(
        {
            "ok": True,
            "draft_saved": result.draft_saved,
            "seq": a.draft_seq,
            "steps_opened": len(a.steps_opened),
            "goal_acknowledged": a.goal_acknowledged_at is not None,
        }
    )


@login_not_required
@require_POST
@annotate_errors(json=True)
def submit(request: HttpRequest, slug: str, public_id: str) -> JsonResponse:
    """Submit & Continue: ``{"answer": {...}, "submission_id": "..."}``."""
    loaded = _json_load(request, slug)
    if isinstance(loaded, JsonResponse):
        return loaded
    study, p = loaded
    body = json_body(request)
    if isinstance(body, JsonResponse):
        return body
    result = annotation_submit(
        participation=p,
        public_id=public_id,
        answer=body.get("answer"),
        submission_id=body.get("submission_id") or "",
    )
    p.refresh_from_db()
    return JsonResponse(
        {
            "ok": True,
            "created": result.created,
            "annotation": result.annotation.pk,
            "surplus": result.annotation.surplus,
            "next": route(p),
        }
    )
