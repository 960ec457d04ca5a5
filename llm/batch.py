"""The OpenAI Batch API executor.

Builds JSONL input files within the API's limits (50,000 requests, 200 MB), uploads them,
creates batches, and persists every batch id (``BatchJob``) so a restart picks up running
batches. Each pass polls the open batches, maps finished results back into the ledger by
``custom_id`` (the request's ledger key), and resubmits only the failed or expired
requests, up to LLM_BATCH_MAX_RESUBMITS times; what still fails is recorded as
``api_error``. Parse failures are recorded as ``parse_failed`` (a batch cannot re-ask).

Every output line goes through the online client's checks (``completion_envelope``,
``_usage``): a line that is not JSON, a body that is not a completion (``[]``,
``{"choices": [null]}``, non-string content) or an error line is a failed request with
its reason, never an exception that fails the job."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

from django.conf import settings

from llm.completions import MalformedResponse, _usage, classify_completion, completion_envelope
from llm.constants import BATCH_MAX_BYTES, BATCH_MAX_REQUESTS, OUTCOME_API_ERROR, PATH_JSON_SCHEMA, PATH_TEXT
from llm.job_lifecycle import job_endpoint, llm_job_finish, llm_job_refresh_counts
from llm.ledger import ledger_lookup, ledger_write
from llm.models import BatchJob, LLMJob
from llm.outbound import destination_check
from llm.prices import request_cost
from llm.request import LLMRequest, request_body

logger = logging.getLogger(__name__)
TERMINAL = {"completed", "expired", "failed", "cancelled"}
# The request of an output line that is not JSON, when its custom_id can still be read.
_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"([0-9A-Za-z_-]{1,200})"')
LINE_CHARS = 120  # of an unreadable line, quoted in its error
# The Batch API endpoint of each request path (LLMRequest.path_url).
BATCH_ENDPOINTS: dict[str, Literal["/v1/chat/completions", "/v1/completions"]] = {
    "/chat/completions": "/v1/chat/completions",
    "/completions": "/v1/completions",
}


def batch_files(
    lines: list[tuple[str, bytes]], *, max_requests: int = BATCH_MAX_REQUESTS, max_bytes: int = BATCH_MAX_BYTES
) -> list[list[tuple[str, bytes]]]:
    """Split (key, line) pairs into input files within the request and size limits."""
    files: list[list[tuple[str, bytes]]] = []
    current: list[tuple[str, bytes]] = []
    size = 0
    for key, line in lines:
        if len(line) + 1 > max_bytes:
            raise ValueError(f"request {key} alone is larger than the batch file limit of {max_bytes} bytes")
        if current and (len(current) >= max_requests or size + len(line) + 1 > max_bytes):
            files.append(current)
            current, size = [], 0
        current.append((key, line))
        size += len(line) + 1
    if current:
        files.append(current)
    return files


class BatchExecutor:
    def __init__(self, job: LLMJob):
        import openai

        self.job = job
        self.endpoint = job_endpoint(job)
        destination_check(self.endpoint.base_url)
        self.openai = openai.OpenAI(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.api_key or "none",
            timeout=settings.LLM_TIMEOUT_SECONDS,
            http_client=openai.DefaultHttpxClient(follow_redirects=False),
        )
        self.requests = {key: LLMRequest.from_dict(raw) for key, raw in zip(job.keys, job.requests)}

    def run(self) -> str:
        """One pass: poll open batches, submit what has neither an answer nor a batch.
        Returns "done", or "waiting: ..." when batches are still running."""
        try:
            for batch in self.job.batches.filter(status=BatchJob.Status.SUBMITTED):
                self._poll(batch)
            # Keys this job already sent are followed up by _poll (resubmission or a final
            # api_error); only keys never sent and without an answer go into new batches.
            sent_keys: set[str] = set()
            for batch in self.job.batches.exclude(status=BatchJob.Status.SUPERSEDED):
                sent_keys.update(batch.requests)
            todo = [k for k in dict.fromkeys(self.job.keys) if k not in sent_keys and ledger_lookup(k) is None]
            if todo:
                self._submit(todo, attempt=1)
        finally:
            self.openai.close()
        still_open = self.job.batches.filter(status=BatchJob.Status.SUBMITTED).count()
        if still_open:
            llm_job_refresh_counts(self.job)
            return f"waiting: {still_open} batch(es) running"
        llm_job_finish(self.job)
        return "done"

    def _line(self, key: str) -> bytes:
        request = self.requests[key]
        path = PATH_TEXT if request.schema is None else PATH_JSON_SCHEMA
        body = request_body(request, self.endpoint.model, path=path)
        return json.dumps(
            {"custom_id": key, "method": "POST", "url": f"/v1{request.path_url}", "body": body}, ensure_ascii=False
        ).encode("utf-8")

    def _submit(self, keys: list[str], *, attempt: int) -> None:
        # A batch file serves one endpoint: chat and plain completions go in separate batches.
        by_url: dict[str, list[str]] = {}
        for key in keys:
            by_url.setdefault(self.requests[key].path_url, []).append(key)
        for url_keys in by_url.values():
            self._submit_same_endpoint(url_keys, attempt=attempt)

    def _submit_same_endpoint(self, keys: list[str], *, attempt: int) -> None:
        for chunk in batch_files([(key, self._line(key)) for key in keys]):
            data = b"\n".join(line for _, line in chunk) + b"\n"
            uploaded = self.openai.files.create(
                file=(f"{self.job.run or 'job'}-{self.job.pk}.jsonl", data), purpose="batch"
            )
            endpoint = BATCH_ENDPOINTS[self.requests[chunk[0][0]].path_url]
            remote = self.openai.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")
            BatchJob.objects.create(
                job=self.job,
                base_url=self.endpoint.base_url,
                model=self.endpoint.model,
                batch_id=remote.id,
                input_file_id=uploaded.id,
                remote_status=remote.status or "",
                attempt=attempt,
                requests={key: self.requests[key].to_dict() for key, _ in chunk},
                n_requests=len(chunk),
            )

    def _download(self, file_id: str | None) -> list[tuple[Any, dict[str, Any] | None, str]]:
        """Each output line as ``(custom_id, the line, "")``, or ``(custom_id if it can be
        read, None, what is wrong)`` for a line that is not a JSON object."""
        if not file_id:
            return []
        content = self.openai.files.content(file_id).content.decode("utf-8", "replace")
        lines: list[tuple[Any, dict[str, Any] | None, str]] = []
        for raw in content.splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except (ValueError, RecursionError):
                line = None
            if isinstance(line, dict):
                lines.append((line.get("custom_id"), line, ""))
                continue
            found = _CUSTOM_ID.search(raw)
            what = "not JSON" if line is None else f"a JSON {type(line).__name__}, not an object"
            lines.append(
                (
                    found.group(1) if found else None,
                    None,
                    f"malformed response: batch output line is {what}: {raw[:LINE_CHARS]!r}",
                )
            )
        return lines

    def _poll(self, batch: BatchJob) -> None:
        remote = self.openai.batches.retrieve(batch.batch_id)
        batch.remote_status = remote.status or ""
        if remote.status not in TERMINAL:
            batch.save(update_fields=["remote_status", "updated_at"])
            return
        answered: set[str] = set()
        errors: dict[str, str] = {}
        unreadable: list[str] = []
        for key, line, problem in self._download(remote.output_file_id) + self._download(remote.error_file_id):
            if not isinstance(key, str) or key not in batch.requests:
                if problem:
                    unreadable.append(problem)
                continue
            if line is None:
                errors[key] = problem
                continue
            answer = line.get("response")
            response: dict[str, Any] = answer if isinstance(answer, dict) else {}
            if line.get("error") or response.get("status_code") != 200:
                errors[key] = _line_error(line, response)
                continue
            try:
                body = completion_envelope(response.get("body"))
            except MalformedResponse as exc:
                errors[key] = f"malformed response: {exc}"
                continue
            self._record(key, body)
            answered.add(key)
        missing = [k for k in batch.requests if k not in answered]  # failed, or never run (expired)
        batch.n_succeeded = len(answered)
        batch.n_failed = len(missing)
        batch.status = BatchJob.Status.COMPLETED
        batch.error = "; ".join([f"{k[:12]}: {e}" for k, e in list(errors.items())[:20]] + unreadable[:5])
        batch.save()
        if not missing:
            return
        if batch.attempt <= settings.LLM_BATCH_MAX_RESUBMITS:
            logger.info("batch %s: resubmitting %d failed or expired requests", batch.batch_id, len(missing))
            self._submit(missing, attempt=batch.attempt + 1)
        else:
            for key in missing:
                self._record_failure(key, errors.get(key) or f"batch {remote.status}; request not run")

    def _record(self, key: str, body: dict[str, Any]) -> None:
        request = self.requests[key]
        verdict = classify_completion(request, body)  # the body passed completion_envelope
        tokens_in, tokens_out = _usage(body)
        ledger_write(
            key,
            dict(
                stage=request.stage,
                role=self.job.role,
                run=self.job.run,
                base_url=self.endpoint.base_url,
                model=self.endpoint.model,
                executor=self.job.executor,
                request=request.to_dict(),
                response=body,
                response_text=verdict.text,
                finish_reason=verdict.finish_reason,
                outcome=verdict.outcome,
                parsed=verdict.value if verdict.outcome == "ok" else None,
                error=verdict.error,
                path=PATH_TEXT if request.schema is None else PATH_JSON_SCHEMA,
                attempts=1,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                latency_ms=0,
                cost_usd=request_cost(
                    model=self.endpoint.model,
                    price_input=self.endpoint.price_input,
                    price_output=self.endpoint.price_output,
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                    executor=self.job.executor,
                ),
            ),
        )

    def _record_failure(self, key: str, error: str) -> None:
        request = self.requests[key]
        ledger_write(
            key,
            dict(
                stage=request.stage,
                role=self.job.role,
                run=self.job.run,
                base_url=self.endpoint.base_url,
                model=self.endpoint.model,
                executor=self.job.executor,
                request=request.to_dict(),
                response=None,
                outcome=OUTCOME_API_ERROR,
                error=error,
                path=PATH_JSON_SCHEMA if request.schema else PATH_TEXT,
                attempts=1,
            ),
        )


def _line_error(line: dict[str, Any], response: dict[str, Any]) -> str:
    """The reason of an error line: its status code, error code and message, whatever
    shape the error has."""
    body = response.get("body")
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    parts = (response.get("status_code", ""), error.get("code", ""), error.get("message", ""))
    return " ".join(str(p) for p in parts if p not in ("", None)).strip()[:500] or "error line without a message"
