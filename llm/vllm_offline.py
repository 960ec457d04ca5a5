"""vLLM's offline engine as an executor, for users with a GPU.

vLLM is imported only when this executor is chosen (`pip install -r requirements-gpu.txt`;
it neither installs nor runs on CPU-only machines). The model is the job's endpoint model:
a local path or a model id already in the local Hugging Face cache. JSON stages are
constrained with vLLM's structured outputs (``StructuredOutputsParams(json=schema)``, the
parameter that replaced ``guided_json`` in vLLM 0.12). Requests run in chunks and every
finished chunk is written to the ledger, so an interrupted job resumes where it stopped."""
from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from llm.client import LLMRequest, classify_completion, ledger_lookup, ledger_write
from llm.constants import PATH_JSON_SCHEMA, PATH_TEXT
from llm.models import LLMJob
from llm.services import job_endpoint, llm_job_finish, llm_job_refresh_counts

CHUNK = 256


class ExecutorUnavailable(RuntimeError):
    """The chosen executor cannot run on this machine."""


def _import_vllm():
    try:
        import vllm
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError as exc:
        raise ExecutorUnavailable(
            "the vllm_offline executor needs vLLM on a CUDA machine: pip install -r requirements-gpu.txt "
            f"({exc})"
        ) from exc
    return vllm, StructuredOutputsParams


class VLLMOfflineExecutor:
    def __init__(self, job: LLMJob):
        self.job = job
        self.endpoint = job_endpoint(job)

    def _sampling(self, request: LLMRequest, vllm, structured) -> Any:
        params = request.params
        kwargs: dict[str, Any] = {
            "temperature": params.get("temperature", 0.0) or 0.0,
            "max_tokens": params.get("max_tokens") or settings.LLM_DEFAULT_MAX_TOKENS,
        }
        for name in ("top_p", "seed", "stop", "presence_penalty", "frequency_penalty"):
            if params.get(name) is not None:
                kwargs[name] = params[name]
        if request.schema is not None:
            kwargs["structured_outputs"] = structured(json=request.schema)
        return vllm.SamplingParams(**kwargs)

    def run(self) -> str:
        vllm, structured = _import_vllm()
        engine = vllm.LLM(model=self.endpoint.model)
        requests = [(key, LLMRequest.from_dict(raw)) for key, raw in zip(self.job.keys, self.job.requests)]
        todo = [(key, request) for key, request in requests if ledger_lookup(key) is None]
        # generate() takes plain prompts and chat() takes conversations: run each kind apart.
        groups = [[p for p in todo if p[1].prompt is not None], [p for p in todo if p[1].prompt is None]]
        for group in groups:
            for start in range(0, len(group), CHUNK):
                status = LLMJob.objects.filter(pk=self.job.pk).values_list("status", flat=True).first()
                if status != LLMJob.Status.RUNNING:
                    llm_job_refresh_counts(self.job)
                    return status or "gone"
                chunk = group[start:start + CHUNK]
                sampling = [self._sampling(r, vllm, structured) for _, r in chunk]
                started = time.perf_counter()
                if chunk[0][1].prompt is not None:
                    outputs = engine.generate([r.prompt for _, r in chunk], sampling, use_tqdm=False)
                else:
                    outputs = engine.chat([r.messages for _, r in chunk], sampling, use_tqdm=False)
                latency_ms = int((time.perf_counter() - started) * 1000 / max(1, len(chunk)))
                for (key, request), output in zip(chunk, outputs):
                    self._record(key, request, output, latency_ms)
        llm_job_finish(self.job)
        return "done"

    def _record(self, key: str, request: LLMRequest, output: Any, latency_ms: int) -> None:
        completion = output.outputs[0]
        body = {"choices": [{"message": {"role": "assistant", "content": completion.text},
                             "finish_reason": completion.finish_reason}],
                "usage": {"prompt_tokens": len(output.prompt_token_ids or []),
                          "completion_tokens": len(completion.token_ids or [])}}
        verdict = classify_completion(request, body)
        ledger_write(key, dict(
            stage=request.stage, role=self.job.role, run=self.job.run, base_url="vllm-offline",
            model=self.endpoint.model, executor=self.job.executor, request=request.to_dict(), response=body,
            response_text=verdict.text, finish_reason=verdict.finish_reason, outcome=verdict.outcome,
            parsed=verdict.value if verdict.outcome == "ok" else None, error=verdict.error,
            path=PATH_JSON_SCHEMA if request.schema else PATH_TEXT, attempts=1,
            tokens_in=body["usage"]["prompt_tokens"], tokens_out=body["usage"]["completion_tokens"],
            latency_ms=latency_ms, cost_usd=None,
        ))
