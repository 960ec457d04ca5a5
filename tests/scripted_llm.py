"""A scripted OpenAI-compatible server on 127.0.0.1 for tests and benchmarks.

It speaks enough of the API for the real ``openai`` client: chat completions, models,
files and batches. Tests script its answers (a queue, rules matched on the request, or
a default function), and read back every request it received and the highest number of
requests it had in flight at once."""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """A 200 chat completion."""

    content: str = ""
    finish_reason: str = "stop"
    refusal: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5


@dataclass
class Status:
    """An HTTP error answer."""

    code: int
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Raw:
    """Any answer at all, byte for byte: an HTML error page with status 200, ``[]``,
    ``{"choices": [null]}``, ... (a server that misbehaves)."""

    body: bytes | str
    code: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[dict[str, Any]], "Reply | Status | Raw"]


def last_user_message(body: dict[str, Any]) -> str:
    """The last user message of a chat request, or the prompt of a plain completion."""
    if body.get("prompt") is not None:
        return body["prompt"]
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return users[-1]["content"] if users else ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog is taken when the server binds, so it is set on the class: with the
    # default of 5, a client opening dozens of connections at once has some of them reset.
    request_queue_size = 1024


class ScriptedLLM:
    def __init__(self, *, latency: float = 0.0, reject_json_schema: bool = False, batch_polls_until_done: int = 1):
        self.latency = latency
        self.reject_json_schema = reject_json_schema
        self.batch_polls_until_done = batch_polls_until_done
        self.default: Responder = lambda body: Reply(content=json.dumps({"echo": last_user_message(body)}))
        self.rules: list[tuple[Callable[[dict], bool], deque]] = []
        self._queue: deque = deque()
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []  # the Authorization header of each chat or completion request
        self.in_flight = 0
        self.max_in_flight = 0
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_failure: Callable[[dict], str | None] = lambda line: None  # custom line -> error code
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        # Polled every 20 ms for its shutdown: with the default half second, each server's
        # exit took 0.5 s, and hundreds of tests start one.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-llm", daemon=True
        )

    # -- lifecycle --------------------------------------------------------------------
    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- scripting --------------------------------------------------------------------
    def queue(self, *answers: Reply | Status | Raw) -> None:
        """Answers for the next requests, in order, before rules and the default."""
        self._queue.extend(answers)

    def on(self, match: Callable[[dict], bool], *answers: Reply | Status | Raw) -> None:
        """Answers, in order, for requests that ``match``; the last one repeats."""
        self.rules.append((match, deque(answers)))

    def chat_requests(self) -> list[dict[str, Any]]:
        """Every chat or plain completion request received, in order."""
        with self._lock:
            return [r for r in self.requests if r.get("messages") is not None or r.get("prompt") is not None]

    def _answer(self, body: dict[str, Any]) -> Reply | Status | Raw:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            for match, answers in self.rules:
                if match(body):
                    return answers.popleft() if len(answers) > 1 else answers[0]
        return self.default(body)

    def completion_body(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        if body.get("prompt") is not None:  # /v1/completions
            return {
                "id": f"cmpl-{next(self._ids)}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "text": reply.content, "finish_reason": reply.finish_reason}],
                "usage": {
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                },
            }
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.refusal:
            message = {"role": "assistant", "content": None, "refusal": reply.refusal}
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }

    # -- batches ----------------------------------------------------------------------
    def _run_batch(self, batch: dict[str, Any]) -> None:
        out, errors = [], []
        for raw in self.files[batch["input_file_id"]].decode().splitlines():
            line = json.loads(raw)
            code = self.batch_failure(line)
            if code:
                errors.append(
                    {
                        "id": f"batch_req_{next(self._ids)}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": f"scripted failure {code}"},
                    }
                )
                continue
            reply = self._answer(line["body"])
            if isinstance(reply, Raw):
                out.append(self._raw_batch_line(line["custom_id"], reply))
            elif isinstance(reply, Status):
                out.append(
                    {
                        "id": f"batch_req_{next(self._ids)}",
                        "custom_id": line["custom_id"],
                        "error": None,
                        "response": {"status_code": reply.code, "body": {"error": {"message": reply.message}}},
                    }
                )
            else:
                out.append(
                    {
                        "id": f"batch_req_{next(self._ids)}",
                        "custom_id": line["custom_id"],
                        "error": None,
                        "response": {"status_code": 200, "body": self.completion_body(line["body"], reply)},
                    }
                )
        batch["output_file_id"] = (
            self._store_file("\n".join(x if isinstance(x, str) else json.dumps(x) for x in out).encode())
            if out
            else None
        )
        batch["error_file_id"] = self._store_file("\n".join(json.dumps(x) for x in errors).encode()) if errors else None
        batch["request_counts"] = {"total": len(out) + len(errors), "completed": len(out), "failed": len(errors)}

    def _raw_batch_line(self, custom_id: str, reply: Raw) -> dict[str, Any] | str:
        """A ``Raw`` answer in a batch: a JSON body becomes the line's response body as it
        is (``[]``, ``{"choices": [null]}``, ...); anything else is written into the line
        verbatim, which makes the output line itself unreadable JSON."""
        text = reply.body.decode() if isinstance(reply.body, bytes) else reply.body
        try:
            body = json.loads(text)
        except ValueError:
            return (
                f'{{"id": "batch_req_{next(self._ids)}", "custom_id": "{custom_id}", "error": null, '
                f'"response": {{"status_code": {reply.code}, "body": {text}}}}}'
            )
        return {
            "id": f"batch_req_{next(self._ids)}",
            "custom_id": custom_id,
            "error": None,
            "response": {"status_code": reply.code, "body": body},
        }

    def _store_file(self, data: bytes) -> str:
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = data
        return file_id

    # -- HTTP -------------------------------------------------------------------------
    def _handler_class(self):
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm
            # and delayed ACKs would add about 40 ms to every keep-alive request.
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:
                pass

            def _send(
                self, code: int, payload: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
            ) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if raw is None else "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                if self.path.startswith("/v1/batches/"):
                    batch = scripted.batches.get(self.path.rsplit("/", 1)[1])
                    if batch is None:
                        return self._send(404, {"error": {"message": "no such batch"}})
                    batch["_polls"] += 1
                    if batch["status"] == "in_progress" and batch["_polls"] >= scripted.batch_polls_until_done:
                        scripted._run_batch(batch)
                        batch["status"] = batch.get("_final_status", "completed")
                    return self._send(200, {k: v for k, v in batch.items() if not k.startswith("_")})
                if self.path.startswith("/v1/files/") and self.path.endswith("/content"):
                    file_id = self.path.split("/")[3]
                    return self._send(200, None, raw=scripted.files[file_id])
                return self._send(404, {"error": {"message": f"unknown path {self.path}"}})

            def do_POST(self) -> None:
                raw = self._body()
                if self.path.rstrip("/") == "/v1/files":
                    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                        f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + raw
                    )
                    for part in message.iter_parts():
                        if part.get_filename():
                            payload = part.get_payload(decode=True)  # a file part decodes to bytes
                            assert isinstance(payload, bytes)
                            file_id = scripted._store_file(payload)
                            return self._send(
                                200,
                                {
                                    "id": file_id,
                                    "object": "file",
                                    "purpose": "batch",
                                    "bytes": len(scripted.files[file_id]),
                                    "created_at": int(time.time()),
                                    "filename": part.get_filename(),
                                    "status": "processed",
                                },
                            )
                    return self._send(400, {"error": {"message": "no file"}})
                body = json.loads(raw or b"{}")
                if self.path.rstrip("/") == "/v1/batches":
                    batch_id = f"batch_{next(scripted._ids)}"
                    scripted.batches[batch_id] = {
                        "id": batch_id,
                        "object": "batch",
                        "endpoint": body["endpoint"],
                        "status": "in_progress",
                        "input_file_id": body["input_file_id"],
                        "completion_window": body["completion_window"],
                        "created_at": int(time.time()),
                        "output_file_id": None,
                        "error_file_id": None,
                        "request_counts": {"total": 0, "completed": 0, "failed": 0},
                        "_polls": 0,
                    }
                    return self._send(
                        200, {k: v for k, v in scripted.batches[batch_id].items() if not k.startswith("_")}
                    )
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/v1/completions"):
                    return self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                with scripted._lock:
                    scripted.requests.append(body)
                    scripted.authorizations.append(self.headers.get("Authorization", ""))
                    scripted.in_flight += 1
                    scripted.max_in_flight = max(scripted.max_in_flight, scripted.in_flight)
                # A request stops counting as in flight before its answer is written: a client
                # may send its next request as soon as it has read this one's answer.
                counted = [True]

                def answered() -> None:
                    with scripted._lock:
                        if counted[0]:
                            scripted.in_flight -= 1
                            counted[0] = False

                try:
                    if scripted.latency:
                        time.sleep(scripted.latency)
                    fmt = (body.get("response_format") or {}).get("type")
                    if scripted.reject_json_schema and fmt == "json_schema":
                        answered()
                        return self._send(
                            400,
                            {
                                "error": {
                                    "message": "response_format json_schema is not supported",
                                    "type": "invalid_request_error",
                                }
                            },
                        )
                    reply = scripted._answer(body)
                    answered()
                    if isinstance(reply, Raw):
                        data = reply.body.encode() if isinstance(reply.body, str) else reply.body
                        self.send_response(reply.code)
                        self.send_header("Content-Type", reply.content_type)
                        self.send_header("Content-Length", str(len(data)))
                        for name, value in reply.headers.items():
                            self.send_header(name, value)
                        self.end_headers()
                        self.wfile.write(data)
                        return None
                    if isinstance(reply, Status):
                        return self._send(reply.code, {"error": {"message": reply.message}}, reply.headers)
                    return self._send(200, scripted.completion_body(body, reply))
                finally:
                    answered()

        return Handler


def judge_role_point_at(settings, server: ScriptedLLM, *, model: str = "how2judge") -> None:
    """Point the How2Score judge role (what JUDGE_BASE_URL and JUDGE_MODEL set) at ``server``."""
    roles = dict(settings.LLM_ROLES)
    roles["how2score_judge"] = {
        "base_url": server.base_url,
        "api_key": "k",
        "model": model,
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_ROLES = roles
