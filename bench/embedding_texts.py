"""The test set of ``bench/embeddings.py``: about 2,000 texts drawn from the product's own files.

* the demo's procedures (goal, the embedded "goal + numbered steps" text, each step, the
  resources), the demo generations' steps and the CoScript demo's goals;
* sentences of the project's documentation (``docs/*.md``, ``README.md``): varied English;
* synthetic procedures that recombine real steps under real goals (5 to 15 steps, so some
  run past the model's 256-token limit and are cut), seeded;
* a few awkward strings: accents, CJK, emoji, digits, very long words, blank text.

No Django; the same seed gives the same list."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

AWKWARD = [
    "",
    " ",
    "Crème brûlée à la française: caramélisez le sucre.",
    "如何煮米饭",
    "用电饭煲煮米饭，然后焖十分钟。",
    "Bake 🍰 at 180 °C for 25–30 min.",
    "Step 1) mix 2½ cups; step 2) wait 10'",
    "ÀÉÎÕÜ ñ ç ß ø å æ œ",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
    "a" * 150,
    "1234567890 " * 20,
    "C++ / C# / F# & .NET",
    "Ünïcödé wörds wïth dïäcrïtïcs",
    "Tab\tseparated\tvalues\nand\r\nnewlines",
    "Привет, как приготовить борщ?",
    "مرحبا كيف حالك",
    "\u200bzero\u200bwidth\u200bspaces",
    "MiXeD CaSe SHOUTING text",
    "e-mail: someone@example.org",
    "http://example.org/how-to?step=3&x=y",
]


def _sentences(text: str) -> list[str]:
    text = re.sub(r"`{3}.*?`{3}", " ", text, flags=re.S)
    text = re.sub(r"[|#*`>\[\]()_]", " ", text)
    parts = re.split(r"(?<=[.!?])\s+|\n\s*\n", text)
    out = []
    for part in parts:
        part = " ".join(part.split())
        if 20 <= len(part) <= 400 and sum(c.isalpha() for c in part) > len(part) // 2:
            out.append(part)
    return out


def embedding_test_texts(n: int = 2000, *, seed: int = 0) -> list[str]:
    """``n`` distinct texts (the order is part of the seed's result)."""
    rng = random.Random(seed)
    data = BASE_DIR / "demo" / "data"
    procedures = [json.loads(line) for line in (data / "procedures.jsonl").read_text().splitlines() if line.strip()]
    generations = [json.loads(line) for line in (data / "generations.jsonl").read_text().splitlines() if line.strip()]
    coscript = json.loads((data / "coscript.json").read_text())

    texts: list[str] = list(AWKWARD)
    goals: list[str] = []
    steps: list[str] = []
    for proc in procedures:
        goals.append(proc["goal"])
        steps += proc["steps"]
        texts.append(proc["goal"])
        texts.append(
            proc["goal"].strip() + "\n" + "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(proc["steps"], 1))
        )
        texts += proc["steps"]
        if proc.get("resources"):
            texts.append(", ".join(proc["resources"]))
    for gen in generations:
        steps += gen.get("predicted_steps") or []
        texts += gen.get("predicted_steps") or []
    for abstract in coscript.get("abstract_goals", []):
        goals.append(abstract["abstract_goal"])
        texts.append(abstract["abstract_goal"])
        for goal in abstract.get("goals", []):
            goals.append(goal[2])
            texts.append(goal[2])

    doc_sentences: list[str] = []
    for path in sorted((BASE_DIR / "docs").glob("*.md")) + [BASE_DIR / "README.md"]:
        doc_sentences += _sentences(path.read_text(encoding="utf-8"))
    rng.shuffle(doc_sentences)

    seen: set[str] = set()
    unique = [t for t in texts if not (t in seen or seen.add(t))]
    docs_until = min(n, len(unique) + (n - len(unique)) // 2)
    for sentence in doc_sentences:
        if len(unique) >= docs_until:
            break
        if sentence not in seen:
            seen.add(sentence)
            unique.append(sentence)
    while len(unique) < n:
        chosen = rng.sample(steps, rng.randint(5, 15))
        text = rng.choice(goals).strip() + "\n" + "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(chosen, 1))
        if text not in seen:
            seen.add(text)
            unique.append(text)
    return unique[:n]
