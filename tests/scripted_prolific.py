"""A scripted Prolific API server on 127.0.0.1 for the tests of the Prolific integration.

It holds studies, submissions and bonus payments the way Prolific's public API reference
describes them (paths under /api/v1/, ``Authorization: Token <token>``, the study and
submission objects, ``_links.next`` pagination, error bodies ``{"error": {"detail": ...}}``),
and answers what a test scripts instead: a status code with headers (401, 404, 429 with any
``retry-after``, 500), or raw bytes (malformed JSON). Every request is recorded.

It also keeps webhooks as Prolific does (a workspace secret, subscriptions confirmed with the
``X-Hook-Secret`` they were answered with) and sends events signed as Prolific signs them:
``X-Prolific-Request-Signature`` = base64(HMAC-SHA256(secret, request timestamp + raw body)),
with ``X-Prolific-Request-Timestamp``, ``X-Event-ID`` and ``X-Timestamp``. It misbehaves on
request: each event twice, events in reverse order, a redelivery (same id, signed afresh) after
any answer that is not 2xx, and a pay call that is carried out but answered too late (the
client's timeout) or paid only later (Prolific pays asynchronously)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = "/api/v1/"
WORKSPACE_ID = "a1b2c3d4e5f6a1b2c3d4e5f6"


@dataclass
class Event:
    """One webhook event as Prolific keeps it: its id stays the same on every redelivery."""

    event_id: str
    payload: dict[str, Any]
    sent_at: int  # UNIX seconds (X-Timestamp)


@dataclass
class Scripted:
    """One scripted answer, used once, for requests whose path contains ``match``."""

    code: int
    body: bytes | str | dict | None = None
    headers: dict[str, str] = field(default_factory=dict)
    match: str = ""


class ScriptedProlific:
    def __init__(self, *, token: str = "prolific-test-token-0123456789abcdef", page_size: int = 2):
        self.token = token
        self.page_size = page_size
        self.studies: dict[str, dict[str, Any]] = {}
        self.submissions: dict[str, dict[str, Any]] = {}  # id -> submission
        self.bonuses: dict[str, dict[str, Any]] = {}
        self.pay_calls: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Scripted] = deque()
        self.latency = 0.0  # seconds every answer waits (so a test can click twice while one is in flight)
        self.pay_latency = 0.0  # seconds the pay call's answer waits after the payment is made
        self.pay_async = False  # pay: bonuses appear on submissions only at settle_payments()
        self._unsettled: list[str] = []
        self.hook_secret: str | None = None
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.outbox: list[Event] = []
        self._event_clock = int(time.time()) - 3600  # events happened in the last hour, one second apart
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # Polled every 20 ms for its shutdown (the default half second made each exit that long).
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}{PREFIX}"

    def start(self) -> ScriptedProlific:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ test helpers
    def new_id(self) -> str:
        return f"{next(self._ids):024x}"

    def then(self, code: int, body: Any = None, headers: dict[str, str] | None = None, match: str = "") -> None:
        self.script.append(Scripted(code, body, headers or {}, match))

    def add_submission(self, study_id: str, participant_id: str, status: str) -> str:
        sid = self.new_id()
        self.submissions[sid] = {
            "id": sid,
            "study_id": study_id,
            "participant_id": participant_id,
            "status": status,
            "started_at": "2026-11-25T00:00:00Z",
        }
        return sid

    def set_status(self, participant_id: str, status: str) -> None:
        for s in self.submissions.values():
            if s["participant_id"] == participant_id:
                s["status"] = status
                self.emit("submission.status.change", s["id"], participant_id=participant_id, status=status)

    # ------------------------------------------------------------------ webhooks
    def emit(self, event_type: str, resource_id: str, **fields: Any) -> Event | None:
        """Queue an event for every confirmed subscription to its type (none: nothing queued)."""
        if not any(sub["confirmed"] and sub["event_type"] == event_type for sub in self.subscriptions.values()):
            return None
        self._event_clock += 1
        event = Event(
            event_id=f"evt-{self.new_id()}",
            payload={"resource_id": resource_id, "event_type": event_type, **fields},
            sent_at=self._event_clock,
        )
        self.outbox.append(event)
        return event

    def signed(self, event: Event, *, request_time: float | None = None, body: bytes | None = None):
        """The headers and raw body of one delivery of ``event``, signed now (or at ``request_time``)."""
        assert self.hook_secret is not None, "no webhook secret: subscribe first"
        raw = body if body is not None else json.dumps(event.payload).encode()
        stamp = str(int(time.time() if request_time is None else request_time))
        signature = base64.b64encode(
            hmac.new(self.hook_secret.encode(), stamp.encode() + raw, hashlib.sha256).digest()
        ).decode()
        headers = {
            "X-Prolific-Request-Signature": signature,
            "X-Prolific-Request-Timestamp": stamp,
            "X-Event-ID": event.event_id,
            "X-Timestamp": str(event.sent_at),
            "Content-Type": "application/json",
        }
        return headers, raw

    def deliver(
        self,
        post: Callable[[dict[str, str], bytes], int],
        *,
        duplicate: bool = False,
        reverse: bool = False,
        max_attempts: int = 3,
    ) -> list[int]:
        """Send the queued events through ``post(headers, body) -> status``, as Prolific does:
        at least once, retried (same id, signed afresh) until a 2xx or ``max_attempts``; on
        request each one twice, or the newest first. Returns every status answered."""
        events, self.outbox = list(self.outbox), []
        if reverse:
            events.reverse()
        answered = []
        for event in events:
            for _ in range(2 if duplicate else 1):
                for _attempt in range(max_attempts):
                    code = post(*self.signed(event))
                    answered.append(code)
                    if 200 <= code < 300:
                        break
        return answered

    def settle_payments(self) -> None:
        """Prolific's asynchronous payments are made now."""
        for bid in self._unsettled:
            self._apply_bonus(bid)
        self._unsettled = []

    def _apply_bonus(self, bid: str) -> None:
        bonus = self.bonuses[bid]
        for line in bonus["csv"].strip().splitlines():
            participant, amount = line.split(",")
            for sub in self.submissions.values():
                if sub["study_id"] == bonus["study"] and sub["participant_id"] == participant:
                    sub.setdefault("bonus_payments", []).append(round(float(amount) * 100))

    def status_of(self, participant_id: str) -> str:
        return next(s["status"] for s in self.submissions.values() if s["participant_id"] == participant_id)

    def calls(self, method: str, contains: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == method and contains in r["path"]]

    # ------------------------------------------------------------------ the API
    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        route = path[len(PREFIX) :].split("?")[0].strip("/").split("/")
        if method == "GET" and route == ["users", "me"]:
            return 200, {"id": "researcher0000000000000001", "email": "researcher@example.org"}
        if method == "GET" and route == ["workspaces"]:
            return 200, {"results": [{"id": WORKSPACE_ID, "title": "My workspace"}]}
        if method == "POST" and route == ["hooks", "secrets"]:
            if body.get("workspace_id") != WORKSPACE_ID:
                return 400, {"error": {"detail": "Unknown workspace."}}
            self.hook_secret = f"secret-{self.new_id()}"
            return 201, {"id": self.new_id(), "value": self.hook_secret, "workspace_id": WORKSPACE_ID}
        if method == "POST" and route == ["hooks", "subscriptions"]:
            if self.hook_secret is None:
                return 400, {"error": {"detail": "Create a secret first."}}
            if not str(body.get("target_url", "")).startswith("https://"):
                return 400, {"error": {"detail": {"target_url": ["Must use https://."]}}}
            sid = self.new_id()
            self.subscriptions[sid] = {**body, "id": sid, "confirmed": False, "hook_secret": f"hs-{sid}"}
            return 201, ({"id": sid, **body, "is_enabled": True}, {"X-Hook-Secret": f"hs-{sid}"})
        if method == "POST" and len(route) == 3 and route[:2] == ["hooks", "subscriptions"]:
            sub = self.subscriptions.get(route[2])
            if sub is None:
                return 404, {"error": {"detail": "Not found."}}
            if body.get("secret") != sub["hook_secret"]:
                return 400, {"error": {"detail": "Wrong secret."}}
            sub["confirmed"] = True
            return 200, {k: v for k, v in sub.items() if k not in ("confirmed", "hook_secret")}
        if method == "GET" and len(route) == 2 and route[0] == "submissions":
            sub = self.submissions.get(route[1])
            if sub is None:
                return 404, {"error": {"detail": "Not found."}}
            return 200, {"bonus_payments": [], **sub}
        if method == "POST" and route == ["studies"]:
            missing = [
                f
                for f in (
                    "name",
                    "description",
                    "external_study_url",
                    "completion_codes",
                    "total_available_places",
                    "estimated_completion_time",
                    "reward",
                )
                if f not in body
            ]
            if missing:
                return 400, {"error": {"detail": {f: ["This field is required."] for f in missing}}}
            sid = self.new_id()
            self.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
            return 201, self.studies[sid]
        if len(route) >= 2 and route[0] == "studies":
            study = self.studies.get(route[1])
            if study is None:
                return 404, {"error": {"detail": "Not found."}}
            if method == "GET" and len(route) == 2:
                return 200, study
            if method == "POST" and route[2:] == ["transition"]:
                if body.get("action") == "PUBLISH":
                    study["status"] = "ACTIVE"
                elif body.get("action") == "STOP":  # closed to new participants, as Prolific does
                    study["status"] = "AWAITING REVIEW"
                return 200, study
            if method == "GET" and route[2:] == ["submissions"]:
                query = path.split("?", 1)[1] if "?" in path else ""
                page = int(query.split("page=")[1]) if "page=" in query else 1
                rows = [s for s in self.submissions.values() if s["study_id"] == route[1]]
                chunk = rows[(page - 1) * self.page_size : page * self.page_size]
                nxt = None
                if page * self.page_size < len(rows):
                    nxt = {"href": f"{self.base_url}studies/{route[1]}/submissions/?page={page + 1}"}
                return 200, {"results": chunk, "_links": {"next": nxt}, "meta": {"count": len(rows)}}
        if method == "POST" and route == ["submissions", "bulk-approve"]:
            for sid in body.get("submission_ids", []):
                sub = self.submissions.get(sid)
                if sub is None or sub["status"] != "AWAITING REVIEW":
                    return 400, {"error": {"detail": f"Submission {sid} cannot be approved."}}
            for sid in body["submission_ids"]:
                self.submissions[sid]["status"] = "APPROVED"
            return 200, ""
        if method == "POST" and len(route) == 3 and route[0] == "submissions" and route[2] == "transition":
            sub = self.submissions.get(route[1])
            if sub is None:
                return 404, {"error": {"detail": "Not found."}}
            if body.get("action") == "REJECT":
                if len(body.get("message") or "") < 100 or not body.get("rejection_category"):
                    return 400, {"error": {"detail": "message must be at least 100 characters"}}
                sub["status"] = "REJECTED"
            elif body.get("action") == "APPROVE":
                sub["status"] = "APPROVED"
            return 200, sub
        if method == "POST" and route == ["submissions", "bonus-payments"]:
            bonus_rows = [line.split(",") for line in (body.get("csv_bonuses") or "").strip().splitlines()]
            known = {s["participant_id"] for s in self.submissions.values() if s["study_id"] == body.get("study_id")}
            unknown = [r[0] for r in bonus_rows if r[0] not in known]
            if unknown:
                return 400, {"error": {"detail": f"Unknown participants: {', '.join(unknown)}"}}
            amount = round(sum(float(r[1]) for r in bonus_rows) * 100)
            bid = self.new_id()
            self.bonuses[bid] = {
                "id": bid,
                "study": body["study_id"],
                "amount": amount,
                "fees": round(amount * 0.33),
                "total_amount": amount + round(amount * 0.33),
                "csv": body["csv_bonuses"],
            }
            return 201, self.bonuses[bid]
        if method == "POST" and len(route) == 3 and route[0] == "bulk-bonus-payments" and route[2] == "pay":
            if route[1] not in self.bonuses:
                return 404, {"error": {"detail": "Not found."}}
            self.pay_calls.append(route[1])
            if self.pay_async:
                self._unsettled.append(route[1])
            else:
                self._apply_bonus(route[1])
            return 202, ""
        return 404, {"error": {"detail": "Unknown endpoint."}}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                with server._lock:
                    server.requests.append(
                        {
                            "method": method,
                            "path": self.path,
                            "body": body,
                            "authorization": self.headers.get("Authorization", ""),
                        }
                    )
                    scripted = next((s for s in server.script if s.match in self.path), None)
                    if scripted is not None:
                        server.script.remove(scripted)
                        code, answer, headers = scripted.code, scripted.body, scripted.headers
                    elif self.headers.get("Authorization") != f"Token {server.token}":
                        code, answer, headers = 401, {"error": {"detail": "Invalid token."}}, {}
                    else:
                        code, answer = server._answer(method, self.path, body)
                        headers = {}
                        if isinstance(answer, tuple):  # an answer with headers
                            answer, headers = answer
                if server.latency:
                    time.sleep(server.latency)
                if server.pay_latency and method == "POST" and self.path.endswith("/pay/"):
                    time.sleep(server.pay_latency)  # paid, but the answer comes after the client gave up
                data = (
                    answer
                    if isinstance(answer, bytes)
                    else (answer.encode() if isinstance(answer, str) else json.dumps(answer).encode())
                )
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up waiting (a test of a timeout)
                    pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        return Handler
