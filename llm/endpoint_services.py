"""Writes of endpoint records: create, update, retire, unretire, test, assign to roles, and
seeding the first records from the environment (docs/llm.md, "Endpoint records").

Every service validates what it stores and raises :class:`EndpointFieldError` with one
message per field, so a page shows a form error and the API a 400 that names the field."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from core.field_errors import FieldErrors, text_field_clean
from core.secret_masking import MASK
from core.stored_values import max_length_of
from llm.capabilities import capabilities_forget
from llm.endpoint_keys import StoredKeyUnreadable, api_key_encrypt, api_key_last4
from llm.key_env import api_key_env_problem
from llm.models import EndpointRecord, EndpointRoleAssignment, LLMJob
from llm.outbound import destination_problem
from llm.run_models import FINISHED

MAX_API_KEY_LENGTH = 1000
MAX_LIMIT = 2**31 - 1
MAX_PRICE = Decimal("999999")  # USD per million tokens; fits the column (12 digits, 6 decimals)
TEST_EXCERPT_CHARS = 200


class EndpointFieldError(FieldErrors):
    """Refused endpoint-record input: ``errors`` maps each field to what is wrong with it."""


def _base_url(errors: dict, value: Any) -> str:
    url = text_field_clean(
        errors, "base_url", value, max_length=max_length_of(EndpointRecord, "base_url"), required=True
    )
    if "base_url" in errors:
        return url
    problem = base_url_problem(url)
    if problem is not None:
        errors["base_url"] = problem
    return url


def base_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an OpenAI-compatible endpoint's base URL (None: nothing):
    for endpoint records and for the endpoint a registered model names."""
    if any(c.isspace() for c in url):
        return "must not contain spaces"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "must name a host, e.g. http://localhost:8000/v1"
    if parts.username or parts.password:
        return "must not contain credentials: give the API key in its own field"
    if parts.query or parts.fragment:
        return "must not have a query string or fragment"
    return destination_problem(url)  # not the server's own or its private network's (llm/outbound.py)


def _limit(errors: dict, field: str, value: Any) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        errors[field] = "must be a whole number of at least 1, or empty"
        return None
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except (TypeError, ValueError):
        number = None
    if number is None or not 1 <= number <= MAX_LIMIT:
        errors[field] = f"must be a whole number from 1 to {MAX_LIMIT}, or empty"
        return None
    return number


MAX_CONTEXT_LENGTH = 10_000_000  # tokens: far above any served model's context
MIN_CONTEXT_LENGTH = 128  # tokens: below this no prompt of the product fits
MAX_TIMEOUT_SECONDS = 86_400  # one request may take a day at most


def _bounded(errors: dict, field: str, value: Any, maximum: int, minimum: int = 1) -> int | None:
    """A whole number from ``minimum`` to ``maximum`` written in ASCII digits, or None for empty."""
    problem = f"must be a whole number from {minimum} to {maximum} (digits 0-9), or empty"
    if isinstance(value, str) and value.strip() and not re.fullmatch(r"[0-9]+", value.strip()):
        errors[field] = problem  # int() would take "٣", "４０９６", "+5"
        return None
    number = _limit(errors, field, value)
    if field in errors or (number is not None and not minimum <= number <= maximum):
        errors[field] = problem
        return None
    return number


def _flag(errors: dict, field: str, value: Any) -> bool:
    if value in (None, "", False, "false", "off", "0", 0):
        return False
    if value in (True, "true", "on", "1", 1):
        return True
    errors[field] = "must be true or false"
    return False


def _price(errors: dict, field: str, value: Any) -> Decimal | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        errors[field] = "must be a number (USD per million tokens), or empty"
        return None
    try:
        price = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        errors[field] = "must be a number (USD per million tokens), or empty"
        return None
    if not price.is_finite() or price < 0 or price > MAX_PRICE:
        errors[field] = f"must be between 0 and {MAX_PRICE} (USD per million tokens)"
        return None
    return price.quantize(Decimal("0.000001"))


def _api_key(errors: dict, value: Any) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str):
        errors["api_key"] = "must be text"
        return ""
    key = value.strip()
    if len(key) > MAX_API_KEY_LENGTH:
        errors["api_key"] = f"must be at most {MAX_API_KEY_LENGTH} characters"
    elif any(ord(c) < 33 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in key):
        errors["api_key"] = "must not contain spaces or control characters"
    elif not key.isascii():
        errors["api_key"] = "must be ASCII (an HTTP header cannot carry anything else)"
    return key


# Local variables that may hold a key are hidden in error reports, in the decorated function's
# frames and below (``kwds``: the arguments as transaction.atomic's wrapper holds them).
SENSITIVE = ("data", "clean", "value", "key", "api_key", "plaintext", "kwds", "kwargs")


@sensitive_variables(*SENSITIVE)
def endpoint_fields_clean(data: dict[str, Any], *, record: EndpointRecord | None = None) -> dict[str, Any]:
    """Validate the editable fields of a record (``api_key``: a new key to store, empty to
    keep the stored one). Raises EndpointFieldError naming every bad field."""
    errors: dict[str, str] = {}
    name_length = max_length_of(EndpointRecord, "name")
    clean: dict[str, Any] = {
        "name": text_field_clean(errors, "name", data.get("name"), max_length=name_length, required=True),
        "base_url": _base_url(errors, data.get("base_url")),
        "model": text_field_clean(
            errors, "model", data.get("model"), max_length=max_length_of(EndpointRecord, "model"), required=True
        ),
        "api_key_env": text_field_clean(errors, "api_key_env", data.get("api_key_env"), max_length=100),
        "api_key": _api_key(errors, data.get("api_key")),
        "max_concurrency": _limit(errors, "max_concurrency", data.get("max_concurrency")),
        "requests_per_minute": _limit(errors, "requests_per_minute", data.get("requests_per_minute")),
        "tokens_per_minute": _limit(errors, "tokens_per_minute", data.get("tokens_per_minute")),
        "price_input": _price(errors, "price_input", data.get("price_input")),
        "price_output": _price(errors, "price_output", data.get("price_output")),
        "context_length": _bounded(
            errors, "context_length", data.get("context_length"), MAX_CONTEXT_LENGTH, MIN_CONTEXT_LENGTH
        ),
        "timeout_seconds": _bounded(errors, "timeout_seconds", data.get("timeout_seconds"), MAX_TIMEOUT_SECONDS),
        "disable_thinking": _flag(errors, "disable_thinking", data.get("disable_thinking")),
    }
    if clean["api_key_env"] and "api_key_env" not in errors:
        problem = api_key_env_problem(clean["api_key_env"])
        if problem is not None:
            errors["api_key_env"] = problem
    if clean["api_key_env"] and clean["api_key"]:
        errors["api_key"] = "give either a key to store or the environment variable that holds it, not both"
    if "name" not in errors:
        same_name = EndpointRecord.objects.filter(name=clean["name"])
        if record is not None:
            same_name = same_name.exclude(pk=record.pk)
        if same_name.exists():
            errors["name"] = "another endpoint record has this name"
    if errors:
        raise EndpointFieldError(errors)
    return clean


def _in_use_by_unfinished_jobs(record: EndpointRecord) -> list[int]:
    return list(
        LLMJob.objects.filter(endpoint_record=record)
        .exclude(status__in=[*FINISHED, LLMJob.Status.CANCELLED])
        .values_list("pk", flat=True)[:10]
    )


def _apply_key(record: EndpointRecord, clean: dict[str, Any], *, remove_stored_key: bool = False) -> None:
    """A new key is stored (encrypted); a variable name replaces a stored key; with neither,
    a stored key stays unless ``remove_stored_key``."""
    if clean["api_key"]:
        record.api_key_encrypted = api_key_encrypt(clean["api_key"])
        record.api_key_last4 = api_key_last4(clean["api_key"])
        record.api_key_env = ""
    elif record.api_key_encrypted and not clean["api_key_env"] and not remove_stored_key:
        pass  # keep the stored key
    else:
        record.api_key_encrypted = ""
        record.api_key_last4 = ""
        record.api_key_env = clean["api_key_env"]


@sensitive_variables(*SENSITIVE)
@transaction.atomic
def endpoint_record_create(*, source: str = "", **data: Any) -> EndpointRecord:
    """A new record from the fields of :func:`endpoint_fields_clean`."""
    clean = endpoint_fields_clean(data)
    record = EndpointRecord(source=source[:300], **{k: v for k, v in clean.items() if k != "api_key"})
    _apply_key(record, clean)
    record.save()
    return record


@sensitive_variables(*SENSITIVE)
@transaction.atomic
def endpoint_record_update(*, record: EndpointRecord, remove_stored_key: bool = False, **data: Any) -> EndpointRecord:
    """Change a record. Its base URL and model stay as they are while a job that used it is
    unfinished (the job's ledger keys name them): retire it and add a new record instead."""
    record = EndpointRecord.objects.select_for_update().get(pk=record.pk)
    clean = endpoint_fields_clean(data, record=record)
    moved = [f for f in ("base_url", "model") if clean[f] != getattr(record, f)]
    previous = (record.base_url, record.model)
    jobs = _in_use_by_unfinished_jobs(record) if moved else []
    if jobs:
        raise EndpointFieldError(
            {
                moved[0]: (
                    f"cannot change while LLM job(s) {', '.join(map(str, jobs))} that used this record are unfinished "
                    "(their answers are keyed by it): finish or cancel them, or add a new record and assign it instead"
                )
            }
        )
    for name, value in clean.items():
        if name not in ("api_key", "api_key_env"):
            setattr(record, name, value)
    _apply_key(record, clean, remove_stored_key=remove_stored_key)
    if moved:  # the last test was of another endpoint
        record.last_test_at = record.last_test_ok = record.last_test_latency_ms = None
        record.last_test_message = ""
    record.save()
    # What was learned of the endpoint is learned again: a changed URL, model or context
    # may be another server (llm/capabilities.py).
    capabilities_forget(*previous)
    capabilities_forget(record.base_url, record.model)
    return record


@transaction.atomic
def endpoint_record_retire(*, record: EndpointRecord) -> list[str]:
    """Retire a record: it is never deleted (jobs keep pointing at it), but no role uses it
    any more and no new run is sent to it. Returns the roles it was assigned to; they fall
    back to their environment variables."""
    roles = list(EndpointRoleAssignment.objects.filter(record=record).values_list("role", flat=True))
    EndpointRoleAssignment.objects.filter(record=record).delete()
    EndpointRecord.objects.filter(pk=record.pk, retired=False).update(
        retired=True, retired_at=timezone.now(), updated_at=timezone.now()
    )
    record.refresh_from_db()
    return roles


@transaction.atomic
def endpoint_record_unretire(*, record: EndpointRecord) -> EndpointRecord:
    if EndpointRecord.objects.filter(name=record.name, retired=False).exclude(pk=record.pk).exists():
        raise EndpointFieldError({"name": "another live endpoint record has this name"})
    EndpointRecord.objects.filter(pk=record.pk).update(retired=False, retired_at=None, updated_at=timezone.now())
    record.refresh_from_db()
    return record


def role_names() -> list[str]:
    return list(settings.LLM_ROLES)


@transaction.atomic
def endpoint_role_assign(*, role: str, record: EndpointRecord | None) -> EndpointRoleAssignment | None:
    """Make ``record`` the role's endpoint (one per role; the next run uses it, no restart);
    ``None`` removes the assignment, so the role uses its environment variables again."""
    if role not in settings.LLM_ROLES:
        raise EndpointFieldError({"role": f"unknown role; one of {', '.join(settings.LLM_ROLES)}"})
    if record is None:
        EndpointRoleAssignment.objects.filter(role=role).delete()
        return None
    record = EndpointRecord.objects.select_for_update().get(pk=record.pk)
    if record.retired:
        raise EndpointFieldError({"record": f"endpoint record {record.name!r} is retired: unretire it first"})
    assignment, _ = EndpointRoleAssignment.objects.update_or_create(role=role, defaults={"record": record})
    return assignment


# -- testing a record --------------------------------------------------------------------

_ADVICE = {
    401: "The endpoint refused the key: check the API key (the stored key, or the environment variable named).",
    403: "The key may not use this model or endpoint: check its permissions.",
    404: "Nothing at that path: check that the base URL ends where the API starts (often /v1) and the model id.",
    429: "Rate limited or out of quota: wait, check the account, or lower the record's limits.",
}


def _advice(error: str) -> str:
    match = re.match(r"HTTP (\d+)", error)
    if match:
        code = int(match.group(1))
        if code in _ADVICE:
            return _ADVICE[code]
        if code >= 500:
            return "The server failed: look at its logs; try again when it is back."
        return "The server refused the request: check the model id and the base URL."
    if error.startswith("cannot connect"):
        return "Nothing answered at that address: check the host, the port and that the server is running."
    return ""


@sensitive_variables(*SENSITIVE)
def endpoint_record_test(*, record: EndpointRecord, timeout: float | None = None) -> EndpointRecord:
    """Send the `llm_check` request to the record (through the official client, as the
    command does) and store the result on it: when, ok or not, latency, an excerpt of the
    answer or the error and what to do. The key never appears in the stored message."""
    from llm.checks import EndpointCheck, endpoint_check
    from llm.endpoints import endpoint_from_record

    timeout = timeout if timeout is not None else settings.LLM_ENDPOINT_TEST_TIMEOUT_SECONDS
    api_key = ""
    try:
        endpoint = endpoint_from_record("endpoint-test", record)
        api_key = endpoint.api_key
    except StoredKeyUnreadable as exc:
        ok, latency, message = False, None, str(exc)
    else:
        if record.api_key_env and not api_key:
            message_prefix = f"(the environment variable {record.api_key_env} is not set in this process) "
        else:
            message_prefix = ""
        try:
            check = endpoint_check(endpoint, roles=[], timeout=timeout)
        except Exception as exc:  # an answer the client could not read at all
            check = EndpointCheck(
                roles=[],
                base_url=endpoint.base_url,
                model=endpoint.model,
                reachable=False,
                structured_output="",
                latency_ms=None,
                served_model="",
                error=f"unreadable answer: {exc.__class__.__name__}",
            )
        ok, latency = check.reachable, check.latency_ms
        if ok:
            served = (
                f" (served as {check.served_model})"
                if check.served_model and check.served_model != record.model
                else ""
            )
            message = f"{check.describe_capabilities()}{served}; answer: {(check.answer or '')[:TEST_EXCERPT_CHARS]!r}"
        else:
            advice = _advice(check.error)
            message = message_prefix + check.error + (f" — {advice}" if advice else "")
    if api_key:
        message = message.replace(api_key, MASK)
    EndpointRecord.objects.filter(pk=record.pk).update(
        last_test_at=timezone.now(), last_test_ok=ok, last_test_latency_ms=latency, last_test_message=message[:2000]
    )
    record.refresh_from_db()
    return record


# -- seeding from the environment -----------------------------------------------------------


def role_env_sources(role: str) -> dict[str, str]:
    """Which environment variable feeds each of the role's base URL, model and key (read
    from the settings: a role value equal to the default's came from LLM_*)."""
    prefix = settings.LLM_ROLE_PREFIXES.get(role, role.upper())
    default = settings.LLM_DEFAULT_ENDPOINT
    configured = settings.LLM_ROLES[role]
    return {
        field: (f"{prefix}_{suffix}" if configured[field] != default[field] else f"LLM_{suffix}")
        for field, suffix in (("base_url", "BASE_URL"), ("model", "MODEL"), ("api_key", "API_KEY"))
    }


@transaction.atomic
def endpoint_records_seed_from_env() -> list[EndpointRecord]:
    """The first records, from the environment: one for the LLM_* default (named
    ``default``) and one per role with variables of its own (named by the role), each
    assigned to the roles it serves when it is created. Idempotent: each is created once
    (``seed_key``), a role that already has an assignment keeps it, and a later run changes
    nothing an admin did (an unassigned role stays unassigned). The key stays in the environment: the
    record names the variable. Returns the records created now."""
    created: list[EndpointRecord] = []
    records: dict[str, EndpointRecord] = {}
    for role, configured in settings.LLM_ROLES.items():
        if not (configured["base_url"] and configured["model"]):
            continue
        sources = role_env_sources(role)
        own = any(not var.startswith("LLM_") for var in sources.values())
        seed_key = f"env:{role}" if own else "env:LLM"
        if seed_key not in records:
            record = EndpointRecord.objects.filter(seed_key=seed_key).first()
            if record is None:
                base = role if own else "default"
                name, n = base, 1
                while EndpointRecord.objects.filter(name=name).exists():  # a record an admin named so
                    n += 1
                    name = f"{base} (from the environment{f', {n}' if n > 2 else ''})"
                used = [sources["base_url"], sources["model"]] + ([sources["api_key"]] if configured["api_key"] else [])
                fed = list(dict.fromkeys(used))
                record = EndpointRecord.objects.create(
                    name=name,
                    base_url=configured["base_url"],
                    model=configured["model"],
                    api_key_env=sources["api_key"] if configured["api_key"] else "",
                    source="from " + ", ".join(fed),
                    seed_key=seed_key,
                )
                created.append(record)
            records[seed_key] = record
        record = records[seed_key]
        if record in created and not EndpointRoleAssignment.objects.filter(role=role).exists():
            EndpointRoleAssignment.objects.create(role=role, record=record)
    return created
