"""A small client for Prolific's public API (studies, submissions, bonuses), with bounded
retries and a record of every exchange.

Every failure becomes a ``ProlificError`` whose ``kind`` says what went wrong and whose
``what_to_do`` says what the researcher can do about it:

* ``auth`` (401/403): the token is wrong or revoked: save a new token;
* ``not_found`` (404): the study (or submission) is gone on Prolific: relink the study;
* ``rate_limited`` (429 after the last attempt, or a ``Retry-After`` longer than the
  product waits): try again after the time Prolific asked for;
* ``unavailable`` (5xx or no answer after the last attempt): Prolific is failing;
* ``unreachable`` (no connection could be made to PROLIFIC_API_URL's host: a name that does not
  resolve, a refused connection): the address is wrong, or the network is down;
* ``wrong_url`` (a 404 where Prolific's own ``users/me/`` is also 404 at that address, or an
  answer that is not Prolific's): PROLIFIC_API_URL does not point at Prolific's API;
* ``malformed`` (an answer that is not the JSON the endpoint returns);
* ``refused`` (another 4xx, with Prolific's own message).

429, 5xx and network errors are retried with a doubling backoff, at most
``PROLIFIC_MAX_ATTEMPTS`` attempts; a ``Retry-After`` of seconds or an HTTP date is obeyed up
to ``PROLIFIC_RETRY_MAX_SECONDS``, and one that cannot be read ("soon", "-5") falls back to
the backoff. A request that is not safe to repeat (paying bonuses) is retried only on 429,
where Prolific did not act on it."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

try:  # the HTTP library the installed openai client is built on
    import httpx2 as _http
except ImportError:  # pragma: no cover - older releases ship it as httpx
    # The same module under its former name; only one of the two is ever installed.
    import httpx as _http  # type: ignore[no-redef]

from core.app_errors import UpstreamFailed
from core.secret_masking import mask_secrets
from prolific.constants import LOG_EXCERPT_CHARS


class ProlificError(UpstreamFailed):
    """Prolific refused, failed or cannot be asked: in the application's error family with code
    ``prolific_<kind>``, ``what_to_do``, and Prolific's HTTP status as ``upstream_status``."""

    # Kinds raised before anything is sent to Prolific: the caller's state to fix, not Prolific failing.
    LOCAL_KINDS = frozenset({"no_token", "token_unreadable"})
    # Kinds that settings must fix, not a wait: no token, or one Prolific refuses, or an address
    # that is not Prolific's API. Asking again cannot help, so the API answers them 409, not 502.
    SETTINGS_KINDS = LOCAL_KINDS | {"auth", "wrong_url"}
    WHAT_TO_DO = {
        "no_token": "Save your Prolific API token on the Prolific token page (or set PROLIFIC_API_TOKEN).",
        "auth": "Prolific refused the token: check that it is the API token from Prolific's settings (a new one if it "
        "was deleted) and save it again; if it is, check PROLIFIC_API_URL.",
        "token_unreadable": "Save your Prolific API token again on the Prolific token page (the server's secret key "
        "changed since it was saved, so it can no longer be read).",
        "not_found": "Prolific does not know this study any more: check it on Prolific, then relink (publish a new draft).",
        "rate_limited": "Prolific asked to slow down: try again in a few minutes.",
        "unavailable": "Prolific is failing; try again later.",
        "unreachable": "Check PROLIFIC_API_URL (it should be https://api.prolific.com/api/v1/) and this server's "
        "network; if both are right, Prolific is unreachable: try again later.",
        "wrong_url": "PROLIFIC_API_URL does not point at Prolific's API: set it to https://api.prolific.com/api/v1/ "
        "(or remove it to use that default).",
        "malformed": "Prolific's answer could not be read; try again later, and report it if it persists.",
        "refused": "Prolific refused the request; read its message, fix the study's settings and try again.",
    }

    def __init__(self, kind: str, message: str, *, status_code: int | None = None, what_to_do: str | None = None):
        # Settings to fix are a 409 (asking again cannot help); Prolific failing is a 502.
        super().__init__(
            message,
            code=f"prolific_{kind}",
            what_to_do=what_to_do or self.WHAT_TO_DO.get(kind, ""),
            status=409 if kind in self.SETTINGS_KINDS else 502,
            extra={"upstream_status": status_code},
        )
        self.kind = kind
        self.status_code = status_code

    def __str__(self) -> str:
        return f"{self.message} {self.what_to_do}".strip()


@dataclass
class Exchange:
    """One attempt: what was asked and what came back (never the token)."""

    method: str
    path: str
    attempt: int
    status_code: int | None
    request_excerpt: str
    response_excerpt: str
    error: str
    seconds: float


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for, or None when it cannot be read (missing,
    negative, not a number nor an HTTP date, not finite)."""
    if value is None:
        return None
    text = value.strip()[:100]
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


DAY_SECONDS = 86_400


def wait_in_words(seconds: float) -> str:
    """A wait as a person says it: seconds, minutes or hours (rounded up), and beyond a day
    "more than a day" (a Retry-After of 10^20 seconds is not a number to repeat)."""
    if seconds > DAY_SECONDS:
        return "more than a day"
    if seconds < 120:
        n, unit = math.ceil(seconds), "second"
    elif seconds < 2 * 3600:
        n, unit = math.ceil(seconds / 60), "minute"
    else:
        n, unit = math.ceil(seconds / 3600), "hour"
    return f"{n} {unit}{'s' if n != 1 else ''}"


def _excerpt(text: str, secrets: list[str]) -> str:
    return mask_secrets(text[: LOG_EXCERPT_CHARS * 2], secrets)[:LOG_EXCERPT_CHARS]


class ProlificClient:
    def __init__(
        self,
        *,
        token: str,
        base_url: str,
        timeout: float = 20.0,
        max_attempts: int = 4,
        retry_base: float = 1.0,
        retry_max: float = 30.0,
        on_exchange: Callable[[Exchange], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not token:
            raise ProlificError("no_token", "No Prolific API token is saved.")
        self._token = token
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.on_exchange = on_exchange
        self.sleep = sleep

    # ------------------------------------------------------------------ the endpoints
    def study_create(self, draft: dict[str, Any]) -> dict[str, Any]:
        return self._json_object(self.request("POST", "studies/", body=draft), "id")

    def study_get(self, study_id: str) -> dict[str, Any]:
        return self._json_object(self.request("GET", f"studies/{_segment(study_id)}/"), "id")

    def study_transition(self, study_id: str, action: str) -> dict[str, Any]:
        return self._json_object(
            self.request("POST", f"studies/{_segment(study_id)}/transition/", body={"action": action}), None
        )

    def study_submissions(self, study_id: str, *, max_pages: int) -> list[dict[str, Any]]:
        """Every submission of the study, following the ``_links.next`` pages (at most
        ``max_pages``; only links on the API's own host are followed)."""
        path: str | None = f"studies/{_segment(study_id)}/submissions/"
        rows: list[dict[str, Any]] = []
        for _ in range(max_pages):
            if path is None:
                break
            page = self._json_object(self.request("GET", path), "results")
            results = page.get("results")
            if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
                raise ProlificError("malformed", "Prolific's list of submissions has no list of results.")
            rows.extend(results)
            path = self._next_path(page)
        return rows

    def submissions_bulk_approve(self, study_id: str, submission_ids: list[str]) -> Any:
        return self.request(
            "POST", "submissions/bulk-approve/", body={"study_id": study_id, "submission_ids": submission_ids}
        )

    def submission_transition(self, submission_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json_object(
            self.request("POST", f"submissions/{_segment(submission_id)}/transition/", body=body), None
        )

    def bonus_setup(self, study_id: str, csv_bonuses: str) -> dict[str, Any]:
        return self._json_object(
            self.request(
                "POST", "submissions/bonus-payments/", body={"study_id": study_id, "csv_bonuses": csv_bonuses}
            ),
            "id",
        )

    def submission_get(self, submission_id: str) -> dict[str, Any]:
        return self._json_object(self.request("GET", f"submissions/{_segment(submission_id)}/"), "id")

    def me(self) -> dict[str, Any]:
        """The token's own user (``users/me/``): a request that succeeds wherever the URL and the
        token are right, so it tells a wrong address from a study gone."""
        return self._json_object(self.request("GET", "users/me/", diagnose=False), None)

    def workspaces(self) -> list[dict[str, Any]]:
        page = self._json_object(self.request("GET", "workspaces/"), "results")
        results = page.get("results")
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            raise ProlificError("malformed", "Prolific's list of workspaces has no list of results.")
        return results

    def hook_secret_create(self, workspace_id: str) -> dict[str, Any]:
        """A new webhook secret for the workspace (it replaces the workspace's previous one)."""
        return self._json_object(self.request("POST", "hooks/secrets/", body={"workspace_id": workspace_id}), "value")

    def hook_subscription_create(self, workspace_id: str, event_type: str, target_url: str) -> tuple[str, str]:
        """Subscribe ``target_url`` to ``event_type``: the subscription's id and the secret
        (the ``X-Hook-Secret`` header) that confirms it."""
        headers: dict[str, str] = {}
        body = {"workspace_id": workspace_id, "event_type": event_type, "target_url": target_url}
        answer = self._json_object(self.request("POST", "hooks/subscriptions/", body=body, headers_out=headers), None)
        found = answer
        results = answer.get("results")
        if "id" not in answer and isinstance(results, list) and results and isinstance(results[0], dict):
            found = results[0]  # the reference's example wraps the new subscription in a list
        subscription_id = found.get("id")
        hook_secret = headers.get("x-hook-secret", "")
        if not isinstance(subscription_id, str) or not subscription_id or not hook_secret:
            raise ProlificError("malformed", "Prolific's new subscription has no id or no X-Hook-Secret header.")
        return subscription_id, hook_secret

    def hook_subscription_confirm(self, subscription_id: str, hook_secret: str) -> dict[str, Any]:
        return self._json_object(
            self.request("POST", f"hooks/subscriptions/{_segment(subscription_id)}/", body={"secret": hook_secret}),
            None,
        )

    def bonus_pay(self, bonus_id: str) -> Any:
        # Not idempotent on Prolific's side: never repeated after a request that may have arrived.
        return self.request("POST", f"bulk-bonus-payments/{_segment(bonus_id)}/pay/", repeatable=False)

    # ------------------------------------------------------------------ transport
    def _next_path(self, page: dict[str, Any]) -> str | None:
        links = page.get("_links")
        nxt = links.get("next") if isinstance(links, dict) else None
        href = nxt.get("href") if isinstance(nxt, dict) else nxt
        if not isinstance(href, str) or not href:
            return None
        if not href.startswith(self.base_url):
            return None  # a link elsewhere is never followed with the token
        return href[len(self.base_url) :]

    @staticmethod
    def _json_object(data: Any, required: str | None) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ProlificError("malformed", "Prolific answered with something other than a JSON object.")
        if required and required not in data:
            raise ProlificError("malformed", f"Prolific's answer has no '{required}'.")
        return data

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        repeatable: bool = True,
        headers_out: dict[str, str] | None = None,
        diagnose: bool = True,
    ) -> Any:
        """One request, retried as the module says. ``headers_out`` receives the answer's
        headers (lower-case names). A 404 is checked against ``users/me/`` (``diagnose``) to tell
        a wrong PROLIFIC_API_URL from a resource gone."""
        url = self.base_url + path
        payload = json.dumps(body) if body is not None else None
        headers = {"Authorization": f"Token {self._token}", "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        secrets = [self._token]
        for attempt in range(1, self.max_attempts + 1):
            started = time.monotonic()
            try:
                with _http.Client(timeout=self.timeout, follow_redirects=False) as http:
                    response = http.request(method, url, content=payload, headers=headers)
                    text = response.text
            except _http.HTTPError as exc:
                error = f"no answer: {type(exc).__name__}"
                self._record(method, path, attempt, None, payload, "", error, started, secrets)
                self._after_no_answer(exc, attempt, repeatable)
                continue
            code = response.status_code
            self._record(method, path, attempt, code, payload, text, "", started, secrets)
            if headers_out is not None:
                headers_out.update({k.lower(): v for k, v in response.headers.items()})
            if 200 <= code < 300:
                return _answer_json(text, method, path, code)
            if code == 429:
                self._after_rate_limit(response.headers.get("retry-after"), attempt, code)
                continue
            if code >= 500:
                self._after_server_failure(attempt, code, repeatable)
                continue
            raise self._refusal(method, path, code, text, diagnose)
        raise ProlificError("unavailable", "Prolific could not be reached.")  # pragma: no cover

    def _after_no_answer(self, exc: _http.HTTPError, attempt: int, repeatable: bool) -> None:
        """No answer came: wait before the next attempt, or raise when none may follow."""
        if isinstance(exc, _http.ConnectError):
            # Nothing was sent (no connection): a wrong address, not a payment in doubt.
            if attempt < self.max_attempts and repeatable:
                self.sleep(self._backoff(attempt))
                return
            raise ProlificError(
                "unreachable",
                f"No connection could be made to {self._host()} (PROLIFIC_API_URL = {self.base_url}): {_reason(exc)}.",
            ) from exc
        if not repeatable:
            raise ProlificError(
                "unavailable",
                "Prolific did not answer the payment request, so it may or may not have been made.",
                what_to_do="Check the bonus payments on Prolific before paying again.",
            ) from exc
        if attempt < self.max_attempts:
            self.sleep(self._backoff(attempt))
            return
        raise ProlificError("unavailable", f"Prolific did not answer ({type(exc).__name__}).") from exc

    def _after_rate_limit(self, retry_after: str | None, attempt: int, code: int) -> None:
        """A 429: wait as asked (or the backoff) before the next attempt, or raise when the wait
        asked for is too long or attempts ran out."""
        wait = retry_after_seconds(retry_after)
        if wait is not None and wait > self.retry_max:
            span = wait_in_words(wait)
            raise ProlificError(
                "rate_limited",
                f"Prolific asked to wait {span} before the next request.",
                status_code=code,
                what_to_do=f"Try again in {span}."
                if wait <= DAY_SECONDS
                else "Try again tomorrow; if Prolific keeps refusing, check its status page or contact its support.",
            )
        if attempt < self.max_attempts:
            self.sleep(wait if wait is not None else self._backoff(attempt))
            return
        raise ProlificError("rate_limited", f"Prolific still refused after {attempt} attempts (429).", status_code=code)

    def _after_server_failure(self, attempt: int, code: int, repeatable: bool) -> None:
        """A 5xx: wait before the next attempt of a repeatable request, or raise."""
        if repeatable and attempt < self.max_attempts:
            self.sleep(self._backoff(attempt))
            return
        if not repeatable:
            raise ProlificError(
                "unavailable",
                f"Prolific failed ({code}) while taking the payment request.",
                status_code=code,
                what_to_do="Check the bonus payments on Prolific before paying again.",
            )
        raise ProlificError("unavailable", f"Prolific failed ({code}) {attempt} times.", status_code=code)

    def _refusal(self, method: str, path: str, code: int, text: str, diagnose: bool) -> ProlificError:
        """The error of a 4xx answer (a 404 first checked against ``users/me/`` when ``diagnose``)."""
        detail = _error_detail(text)
        if code in (401, 403):
            return ProlificError(
                "auth",
                f"{self._host()} refused the token ({code}{': ' + detail if detail else ''}).",
                status_code=code,
            )
        if code == 404:
            if diagnose:
                self._diagnose_404()
            return ProlificError("not_found", f"Prolific has no such resource ({method} {path}).", status_code=code)
        return ProlificError(
            "refused", f"Prolific refused {method} {path} ({code}): {detail or 'no message'}.", status_code=code
        )

    def _host(self) -> str:
        return _http.URL(self.base_url).host or self.base_url

    def _diagnose_404(self) -> None:
        """After a 404: is the address Prolific's API at all? ``users/me/`` answers wherever the
        URL is right (200, or 401/403 for a bad token); a 404 there too means PROLIFIC_API_URL is
        wrong, not that the study is gone."""
        try:
            self.me()
        except ProlificError as exc:
            if exc.kind == "not_found":
                raise ProlificError(
                    "wrong_url",
                    f"{self.base_url} (PROLIFIC_API_URL) answers 404 even for the token's own user (users/me/): "
                    "it is not Prolific's API.",
                    status_code=404,
                ) from None
            if exc.kind in ("auth", "unreachable", "wrong_url"):
                raise
            # Prolific failing on the check itself says nothing about the address: the 404 stands.

    def _backoff(self, attempt: int) -> float:
        return min(self.retry_max, self.retry_base * (2 ** (attempt - 1)))

    def _record(
        self,
        method: str,
        path: str,
        attempt: int,
        code: int | None,
        payload: str | None,
        text: str,
        error: str,
        started: float,
        secrets: list[str],
    ) -> None:
        if self.on_exchange is None:
            return
        self.on_exchange(
            Exchange(
                method=method,
                path=path[:300],
                attempt=attempt,
                status_code=code,
                request_excerpt=_excerpt(payload or "", secrets),
                response_excerpt=_excerpt(text, secrets),
                error=error[:300],
                seconds=round(time.monotonic() - started, 3),
            )
        )


def _segment(value: str) -> str:
    """An id as one path segment: Prolific's ids are letters and digits."""
    text = str(value)
    if not text or not all(ch.isalnum() or ch in "-_" for ch in text) or len(text) > 100:
        raise ProlificError("malformed", f"{text[:40]!r} is not a Prolific id.")
    return text


def _reason(exc: Exception) -> str:
    """Why a connection failed, in a few words (the name that did not resolve, a refusal)."""
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "name or service not known" in lowered or "nodename nor servname" in lowered or "getaddrinfo" in lowered:
        return "the host name does not resolve"
    if "refused" in lowered:
        return "the connection was refused"
    return text[:120]


def _answer_json(text: str, method: str, path: str, code: int) -> Any:
    """A 2xx answer's JSON ({} for an empty body)."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        raise ProlificError(
            "malformed", f"Prolific's answer to {method} {path} is not JSON.", status_code=code
        ) from None


def _error_detail(text: str) -> str:
    """Prolific's own message from an error body (``{"error": {"detail": ...}}`` or
    ``{"detail": ...}``), cut short; the raw start of the body otherwise."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            detail = inner.get("detail", inner.get("title", ""))
            if isinstance(detail, (list, dict)):
                detail = json.dumps(detail)
            return str(detail)[:200]
        return str(inner)[:200]
    return str(data)[:200]


def now_utc() -> datetime:
    return datetime.now(UTC)
