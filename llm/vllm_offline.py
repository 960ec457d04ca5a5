"""vLLM's offline engine as an executor, for users with a GPU.

vLLM is imported only when this executor is chosen (`pip install -r requirements-gpu.txt`;
it neither installs nor runs on CPU-only machines). The model is the job's endpoint model:
a local path or a model id already in the local Hugging Face cache. JSON stages are
constrained with vLLM's structured outputs (``StructuredOutputsParams(json=schema)``, the
parameter that replaced ``guided_json`` in vLLM 0.12). Requests run in chunks and every
finished chunk is written to the ledger, so an interrupted job resumes where it stopped."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from core.reference_configs import SAMPLING_KWARGS
from llm.completions import classify_completion
from llm.constants import PATH_JSON_SCHEMA, PATH_TEXT
from llm.job_lifecycle import job_endpoint, llm_job_finish, llm_job_heartbeat, llm_job_refresh_counts
from llm.ledger import ledger_lookup, ledger_write
from llm.models import LLMJob
from llm.request import LLMRequest

CHUNK = 256
# Request params that are options of LLM.chat() (the chat template), not of sampling.
CHAT_OPTIONS = ("chat_template", "chat_template_kwargs", "add_generation_prompt")


def engine_kwargs(
    model: str, engine: dict[str, Any] | None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The arguments of ``vllm.LLM(...)`` for a job: the model and the requests' engine
    options (``revision``, ``max_model_len``, ``tensor_parallel_size``, ``dtype``, ...) as
    given. ``hf_token_env`` names the variable whose token is passed as ``hf_token``
    (``HF_TOKEN`` by default); ``worker_multiproc_method`` is set in the environment
    (``VLLM_WORKER_MULTIPROC_METHOD``) by :func:`engine_environment`, not passed."""
    variables: Mapping[str, str] = os.environ if environ is None else environ
    options = dict(engine or {})
    options.pop("worker_multiproc_method", None)
    token_env = options.pop("hf_token_env", "HF_TOKEN")
    kwargs: dict[str, Any] = {"model": model}
    if token_env and variables.get(token_env):
        kwargs["hf_token"] = variables[token_env]
    kwargs.update(options)
    return kwargs


def engine_environment(engine: dict[str, Any] | None) -> dict[str, str]:
    """Environment variables to set before vLLM starts its workers."""
    method = (engine or {}).get("worker_multiproc_method")
    return {"VLLM_WORKER_MULTIPROC_METHOD": method} if method else {}


def chat_kwargs(request: LLMRequest) -> dict[str, Any]:
    """The chat-template options of ``LLM.chat()`` a request carries."""
    return {name: request.params[name] for name in CHAT_OPTIONS if request.params.get(name) is not None}


def job_engine(requests: list[LLMRequest]) -> dict[str, Any]:
    """The one engine every request of a job asks for (one engine is loaded per job)."""
    engines = {json.dumps(r.engine or {}, sort_keys=True) for r in requests}
    if len(engines) > 1:
        raise ValueError(
            "the requests of one vllm_offline job ask for different engine options; run them as separate jobs"
        )
    return json.loads(engines.pop()) if engines else {}


class ExecutorUnavailable(RuntimeError):
    """The chosen executor cannot run on this machine."""


def _import_vllm():
    try:
        import vllm
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError as exc:
        raise ExecutorUnavailable(
            f"the vllm_offline executor needs vLLM on a CUDA machine: pip install -r requirements-gpu.txt ({exc})"
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
        for name in SAMPLING_KWARGS:  # the vllm.SamplingParams options a request may carry
            if params.get(name) is not None:
                kwargs[name] = params[name]
        if request.schema is not None:
            kwargs["structured_outputs"] = structured(json=request.schema)
        return vllm.SamplingParams(**kwargs)

    def run(self) -> str:
        requests = [(key, LLMRequest.from_dict(raw)) for key, raw in zip(self.job.keys, self.job.requests)]
        options = job_engine([r for _, r in requests])
        os.environ.update(engine_environment(options))
        vllm, structured = _import_vllm()
        engine = vllm.LLM(**engine_kwargs(self.endpoint.model, options))
        # The engine loaded (minutes on a cold machine): a beat, and one after each chunk. A
        # load or a chunk longer than the lease reads stalled meanwhile (docs/llm.md).
        llm_job_heartbeat(self.job)
        todo = [(key, request) for key, request in requests if ledger_lookup(key) is None]
        # generate() takes plain prompts and chat() takes conversations (with their template
        # options): run each kind apart.
        groups: dict[str, list] = {}
        for pair in todo:
            kind = "prompt" if pair[1].prompt is not None else json.dumps(chat_kwargs(pair[1]), sort_keys=True)
            groups.setdefault(kind, []).append(pair)
        for group in groups.values():
            for start in range(0, len(group), CHUNK):
                status = LLMJob.objects.filter(pk=self.job.pk).values_list("status", flat=True).first()
                if status != LLMJob.Status.RUNNING:
                    llm_job_refresh_counts(self.job)
                    return status or "gone"
                chunk = group[start : start + CHUNK]
                sampling = [self._sampling(r, vllm, structured) for _, r in chunk]
                started = time.perf_counter()
                if chunk[0][1].prompt is not None:
                    outputs = engine.generate([r.prompt for _, r in chunk], sampling, use_tqdm=False)
                else:
                    outputs = engine.chat(
                        [r.messages for _, r in chunk], sampling, use_tqdm=False, **chat_kwargs(chunk[0][1])
                    )
                latency_ms = int((time.perf_counter() - started) * 1000 / max(1, len(chunk)))
                for (key, request), output in zip(chunk, outputs):
                    self._record(key, request, output, latency_ms)
                llm_job_heartbeat(self.job)
        llm_job_finish(self.job)
        return "done"

    def _record(self, key: str, request: LLMRequest, output: Any, latency_ms: int) -> None:
        completion = output.outputs[0]
        body: dict[str, Any] = {
            "choices": [
                {
                    "message": {"role": "assistant", "content": completion.text},
                    "finish_reason": completion.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": len(output.prompt_token_ids or []),
                "completion_tokens": len(completion.token_ids or []),
            },
        }
        verdict = classify_completion(request, body)
        ledger_write(
            key,
            dict(
                stage=request.stage,
                role=self.job.role,
                run=self.job.run,
                base_url="vllm-offline",
                model=self.endpoint.model,
                executor=self.job.executor,
                request=request.to_dict(),
                response=body,
                response_text=verdict.text,
                finish_reason=verdict.finish_reason,
                outcome=verdict.outcome,
                parsed=verdict.value if verdict.outcome == "ok" else None,
                error=verdict.error,
                path=PATH_JSON_SCHEMA if request.schema else PATH_TEXT,
                attempts=1,
                tokens_in=body["usage"]["prompt_tokens"],
                tokens_out=body["usage"]["completion_tokens"],
                latency_ms=latency_ms,
                cost_usd=None,
            ),
        )
