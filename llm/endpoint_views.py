"""Admin pages of endpoint records: list (with role assignments, the environment variables
that feed unassigned roles, the last test), add, edit, test, retire/unretire, assign roles."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_http_methods, require_POST

from core.permissions import admin_required
from llm.endpoint_forms import EndpointRecordForm
from llm.endpoint_selectors import capabilities_view, endpoint_record_list, role_endpoint_rows
from llm.endpoint_services import (
    EndpointFieldError,
    endpoint_record_create,
    endpoint_record_retire,
    endpoint_record_test,
    endpoint_record_unretire,
    endpoint_record_update,
    endpoint_role_assign,
)
from llm.models import EndpointRecord

_FIELDS = (
    "name",
    "base_url",
    "model",
    "api_key",
    "api_key_env",
    "max_concurrency",
    "requests_per_minute",
    "tokens_per_minute",
    "price_input",
    "price_output",
    "context_length",
    "timeout_seconds",
    "disable_thinking",
)


@admin_required
@never_cache
def endpoint_list(request: HttpRequest) -> HttpResponse:
    records = list(endpoint_record_list())
    for record in records:
        record.capabilities = capabilities_view(record)  # type: ignore[attr-defined]
    return render(
        request,
        "llm/endpoints.html",
        {
            "records": records,
            "live_records": [r for r in records if not r.retired],
            "roles": role_endpoint_rows(),
        },
    )


def _save(request: HttpRequest, form: EndpointRecordForm, save) -> EndpointRecord | None:
    if not form.is_valid():
        return None
    data = {name: form.cleaned_data.get(name) for name in _FIELDS}
    try:
        return save(data)
    except EndpointFieldError as exc:
        for field, message in exc.errors.items():
            form.add_error(field if field in form.fields else None, message)
        return None


@sensitive_post_parameters("api_key")
@admin_required
@never_cache
@require_http_methods(["GET", "POST"])
@sensitive_variables("data")
def endpoint_add(request: HttpRequest) -> HttpResponse:
    form = EndpointRecordForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        record = _save(
            request,
            form,
            lambda data: endpoint_record_create(
                source=f"added on the LLM pages by {request.user.get_username()}", **data
            ),
        )
        if record is not None:
            messages.success(
                request,
                f"Endpoint record {record.name!r} saved (API key: {record.api_key_label}). "
                "Test it, then assign it to roles.",
            )
            return redirect("llm_endpoint_edit", pk=record.pk)
    return render(request, "llm/endpoint_form.html", {"form": form, "record": None}, status=400 if form.errors else 200)


@sensitive_post_parameters("api_key")
@admin_required
@never_cache
@require_http_methods(["GET", "POST"])
@sensitive_variables("data")
def endpoint_edit(request: HttpRequest, pk: int) -> HttpResponse:
    record = get_object_or_404(EndpointRecord, pk=pk)
    form = EndpointRecordForm(request.POST if request.method == "POST" else None, record=record)
    if request.method == "POST":
        saved = _save(
            request,
            form,
            lambda data: endpoint_record_update(
                record=record, remove_stored_key=bool(form.cleaned_data.get("remove_stored_key")), **data
            ),
        )
        if saved is not None:
            messages.success(request, f"Endpoint record {saved.name!r} saved (API key: {saved.api_key_label}).")
            return redirect("llm_endpoint_edit", pk=saved.pk)
    jobs = record.jobs.order_by("-id")[:20]
    return render(
        request,
        "llm/endpoint_form.html",
        {
            "form": form,
            "record": record,
            "jobs": jobs,
            "roles": [a.role for a in record.assignments.all()],
            "all_roles": list(settings.LLM_ROLES),
        },
        status=400 if form.errors else 200,
    )


@admin_required
@require_POST
def endpoint_test(request: HttpRequest, pk: int) -> HttpResponse:
    record = endpoint_record_test(record=get_object_or_404(EndpointRecord, pk=pk))
    if record.last_test_ok:
        messages.success(
            request, f"{record.name}: answered in {record.last_test_latency_ms} ms; {record.last_test_message}"
        )
    else:
        messages.error(request, f"{record.name}: the test failed: {record.last_test_message}")
    return redirect(_back(request, "llm_endpoint_edit", pk))


@admin_required
@require_POST
def endpoint_retire(request: HttpRequest, pk: int) -> HttpResponse:
    record = get_object_or_404(EndpointRecord, pk=pk)
    if request.POST.get("action") == "unretire":
        try:
            endpoint_record_unretire(record=record)
        except EndpointFieldError as exc:
            messages.error(request, f"{record.name} was not unretired: {exc}")
        else:
            messages.success(request, f"{record.name} is live again; assign it to roles to use it.")
    else:
        roles = endpoint_record_retire(record=record)
        fallback = (
            (
                f" Roles {', '.join(roles)} now use their environment variables (or nothing), "
                "until another record is assigned."
            )
            if roles
            else ""
        )
        messages.success(
            request, f"{record.name} is retired: no new run uses it; its jobs keep pointing at it.{fallback}"
        )
    return redirect("llm_endpoints")


@admin_required
@require_POST
def endpoint_role_assign_view(request: HttpRequest) -> HttpResponse:
    role = request.POST.get("role", "")
    raw = request.POST.get("record", "")
    record = None
    if raw:
        if not raw.isdigit() or len(raw) > 12:
            messages.error(request, "record: choose an endpoint record from the list")
            return redirect("llm_endpoints")
        record = EndpointRecord.objects.filter(pk=int(raw)).first()
        if record is None:
            messages.error(request, "record: no such endpoint record")
            return redirect("llm_endpoints")
    try:
        endpoint_role_assign(role=role, record=record)
    except EndpointFieldError as exc:
        messages.error(request, f"The role was not assigned: {exc}")
    else:
        if record is None:
            messages.success(request, f"Role {role} now uses its environment variables.")
        else:
            messages.success(request, f"Role {role} now uses {record.name}; the next run goes there.")
    return redirect(_back(request, "llm_endpoints"))


def _back(request: HttpRequest, name: str, *args) -> str:
    """Back to the list when the form came from it, else to ``name``."""
    from django.urls import reverse

    return reverse("llm_endpoints") if request.POST.get("back") == "list" else reverse(name, args=args)
