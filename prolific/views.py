"""Pages of the Prolific integration: the researcher's token, and the controls of the Prolific
panel on a study's page (publish, publish now, sync, review, bonuses). Thin: each calls one
service and goes back to the study page with what happened, or what to do about a failure."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotate.studies.selectors import study_get
from core.confirm import confirm_page, confirmed
from core.errors import refusal_message
from core.permissions import researcher_required
from prolific import constants as C
from prolific.bonus_services import (
    prolific_bonus_pay,
    prolific_bonus_preview,
    prolific_bonus_reconcile,
    prolific_bonus_resolve,
)
from prolific.client import ProlificError
from prolific.errors import ProlificConflict, ProlificInvalid
from prolific.models import ProlificBonusBatch
from prolific.publish_services import prolific_study_publish, prolific_study_publish_now
from prolific.review_services import prolific_review
from prolific.selectors import prolific_token_state, prolific_webhook_state
from prolific.sync_services import prolific_submissions_sync
from prolific.token_services import prolific_token_clear, prolific_token_save
from prolific.webhooks import prolific_webhooks_subscribe


def _back(slug: str) -> HttpResponse:
    return redirect(reverse("annotate:study_detail", args=[slug]) + "#prolific")


@researcher_required
@require_http_methods(["GET", "POST"])
def token(request: HttpRequest) -> HttpResponse:
    """Save, replace or remove the researcher's Prolific token; it is never shown again."""
    error = ""
    if request.method == "POST":
        if request.POST.get("remove") == "yes":
            prolific_token_clear(user=request.user)
            messages.success(request, "Your Prolific token was removed.")
            return redirect("prolific:token")
        try:
            credential = prolific_token_save(user=request.user, token=request.POST.get("token", ""))
        except ProlificInvalid as exc:
            error = exc.message
        else:
            messages.success(request, f"Saved: your Prolific token ending in …{credential.last4}.")
            nxt = request.POST.get("next", "")
            if nxt.startswith("/studies/") and "//" not in nxt and len(nxt) < 300:
                return redirect(nxt)
            return redirect("prolific:token")
    return render(
        request,
        "prolific/token.html",
        {
            "state": prolific_token_state(request.user),
            "webhooks": prolific_webhook_state(base_url=request.build_absolute_uri("/")),
            "error": error,
            "next": request.GET.get("next", "")[:300],
        },
        status=400 if error else 200,
    )


@researcher_required
@require_POST
def publish(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    try:
        link = prolific_study_publish(
            study=study,
            user=request.user,
            base_url=request.build_absolute_uri("/"),
            relink=request.POST.get("relink") == "yes",
        )
    except (ProlificError, ProlificConflict) as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request,
            f"Draft created on Prolific (study {link.prolific_id}): {link.places} places, "
            f"{link.estimated_minutes} minutes, reward {link.reward_cents / 100:.2f}. "
            "Publish it when ready.",
        )
    return _back(slug)


@researcher_required
@require_http_methods(["GET", "POST"])
def publish_now(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    if not confirmed(request):
        return confirm_page(
            request,
            title="Publish on Prolific?",
            question=(
                "Publish this study on Prolific? Participants can start at once and Prolific charges your balance."
            ),
            action=request.path,
            confirm_label="Yes, publish",
            back_url=reverse("annotate:study_detail", args=[slug]),
        )
    try:
        prolific_study_publish_now(study=study, user=request.user)
    except (ProlificError, ProlificConflict) as exc:
        refusal_message(request, exc)
    else:
        messages.success(request, "Published on Prolific: participants can start.")
    return _back(slug)


@researcher_required
@require_POST
def sync(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    try:
        result = prolific_submissions_sync(study=study, user=request.user)
    except (ProlificError, ProlificConflict) as exc:
        refusal_message(request, exc)
    else:
        note = f"; {result.skipped_malformed} unreadable rows skipped" if result.skipped_malformed else ""
        messages.success(
            request,
            f"Synced {result.seen} submissions ({result.new} new, {result.changed} changed); "
            f"released the slots of {result.released_participants} participants who left "
            f"({result.released_slots} slots){note}.",
        )
    return _back(slug)


@researcher_required
@require_http_methods(["GET", "POST"])
def review(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    policy = request.POST.get("policy", C.POLICY_APPROVE) if request.method == "POST" else C.POLICY_APPROVE
    if not confirmed(request):
        return confirm_page(
            request,
            title="Review on Prolific?",
            question=(
                "Approve every completed participant, and treat the screened-out ones by the chosen policy? "
                "A decision on Prolific cannot be undone."
            ),
            action=request.path,
            confirm_label="Yes, review",
            back_url=reverse("annotate:study_detail", args=[slug]),
        )
    try:
        result = prolific_review(study=study, user=request.user, policy=policy, message=request.POST.get("message"))
    except (ProlificError, ProlificConflict) as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request,
            (
                f"Approved {result.approved} (of them {result.screened_out_approved} screened out), rejected "
                f"{result.rejected}; {result.waiting} still working in the product; {result.already_reviewed} "
                "already reviewed."
                + (
                    f" {result.not_rejectable} screened out by the qualification were approved: Prolific "
                    "does not allow rejecting them."
                    if result.not_rejectable
                    else ""
                )
                + (
                    f" {result.rejected_in_review} rejected for an annotation rejected in review, with its message "
                    "and category."
                    if result.rejected_in_review
                    else ""
                )
            ),
        )
    return _back(slug)


@researcher_required
@require_POST
def bonus_preview(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get(slug=slug)
    try:
        batch = prolific_bonus_preview(
            study=study,
            user=request.user,
            per_item=request.POST.get("per_item", ""),
            quota=request.POST.get("quota", "0"),
        )
    except ProlificConflict as exc:
        refusal_message(request, exc)
    else:
        if not batch.pk:
            messages.info(
                request,
                "Bonus preview: nobody would be paid (no participant who completed the study is "
                "beyond the quota without a bonus paid already); nothing was stored.",
            )
            return _back(slug)
        messages.success(
            request,
            f"Bonus preview: {batch.n_participants} participants, total "
            f"{batch.total_cents / 100:.2f} before Prolific's fees. Nothing is paid until you pay it.",
        )
    return _back(slug)


@researcher_required
@require_http_methods(["GET", "POST"])
def bonus_pay(request: HttpRequest, slug: str, batch_id: int) -> HttpResponse:
    study = study_get(slug=slug)
    batch = get_object_or_404(ProlificBonusBatch, pk=batch_id, link__study=study)
    if not confirmed(request):
        return confirm_page(
            request,
            title="Pay these bonuses?",
            question=(
                f"Pay {batch.n_participants} participants {batch.total_cents / 100:.2f} in total (plus Prolific's fees)? "
                "A payment cannot be undone."
            ),
            action=request.path,
            confirm_label="Yes, pay",
            back_url=reverse("annotate:study_detail", args=[slug]),
        )
    try:
        batch = prolific_bonus_pay(batch=batch, user=request.user)
    except (ProlificError, ProlificConflict) as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request, f"Paid bonuses to {batch.n_participants} participants ({batch.total_cents / 100:.2f})."
        )
    return _back(slug)


@researcher_required
@require_POST
def bonus_resolve(request: HttpRequest, slug: str, batch_id: int) -> HttpResponse:
    """An uncertain payment, settled after checking Prolific: paid=yes or paid=no."""
    study = study_get(slug=slug)
    batch = get_object_or_404(ProlificBonusBatch, pk=batch_id, link__study=study)
    answer = request.POST.get("paid")
    if answer not in ("yes", "no") or not confirmed(request):
        raise BadRequest("paid: must be 'yes' or 'no', with confirm=yes; nothing was done")
    try:
        prolific_bonus_resolve(batch=batch, paid=answer == "yes")
    except ProlificConflict as exc:
        refusal_message(request, exc)
    else:
        messages.success(request, "Recorded as paid." if answer == "yes" else "Recorded as not paid: preview again.")
    return _back(slug)


@researcher_required
@require_POST
def bonus_reconcile(request: HttpRequest, slug: str, batch_id: int) -> HttpResponse:
    """Check on Prolific whether an uncertain payment was made (reads; never pays)."""
    study = study_get(slug=slug)
    batch = get_object_or_404(ProlificBonusBatch, pk=batch_id, link__study=study)
    try:
        result = prolific_bonus_reconcile(batch=batch, user=request.user)
    except (ProlificConflict, ProlificError) as exc:
        refusal_message(request, exc)
    else:
        (messages.success if result.batch.state == "paid" else messages.warning)(request, result.note)
    return _back(slug)


@researcher_required
@require_POST
def webhooks_subscribe(request: HttpRequest) -> HttpResponse:
    """Subscribe this server to Prolific's status events (the token page's button)."""
    if not confirmed(request):
        raise BadRequest("confirm: must be 'yes'; nothing was done")
    try:
        done = prolific_webhooks_subscribe(
            user=request.user,
            base_url=request.build_absolute_uri("/"),
            workspace_id=request.POST.get("workspace_id", "").strip() or None,
        )
    except (ProlificInvalid, ProlificError) as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request,
            f"Subscribed {done.target_url} to {', '.join(done.created)}." if done.created else "Already subscribed.",
        )
    return redirect("prolific:token")


def study_panel(study, request):
    """The Prolific panel on annotate's study page (registered in ProlificConfig.ready)."""
    from prolific.selectors import prolific_panel

    user = getattr(request, "user", None)
    base = request.build_absolute_uri("/") if request is not None else None
    return "prolific/panel.html", prolific_panel(study, user, base_url=base)
