"""Benchmark: CoScript's example retrieval and over-generate-then-filter at dataset scale.

* Retrieval: an index of P pool goals (default 100,000; a verb and one to four nouns from a
  fixed vocabulary), then Q queries (default 3,000) for the two most similar goals; prints
  the build time and p50/p95 per query.
* Filter: G abstract goals (default 1,000) with three specific goals each (one per
  constraint type) and K = 2 candidate scripts per specific goal (6,000 candidates), on the
  bundled all-MiniLM-L6-v2 on this machine's CPU. The ideal is embedding every goal and
  script once, which the filter cannot avoid; it prints the filter's time, the embedding
  time alone, their ratio, and candidates per second; then the keyword mode (no model).

    .venv/bin/python bench/coscript_filter.py [--pool 100000] [--queries 3000] [--goals 1000]"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from coscript.filtering import FilterCandidate, FilterGoal, filter_candidates, script_text  # noqa: E402
from coscript.retrieval import ExampleIndex  # noqa: E402

VERBS = "make clean wash fix paint build cook bake plant grow repair install remove write draw sew fold train".split()
NOUNS = (
    "cake bread soup car bike door window wall floor shirt dress garden tomato rose dog cat fence roof "
    "sink drain lamp chair table shelf letter poem card quilt scarf kite boat tent fire rice pasta salad "
    "curtain rug carpet tile brick deck pool pond hedge lawn tree vase mirror frame clock radio phone"
).split()
CONSTRAINTS = {
    "modifier": ["chocolate", "blue", "small", "vintage", "wooden", "spicy"],
    "method": ["by hand", "with a drill", "in a microwave", "with vinegar", "using a template", "without tools"],
    "intent": ["for a wedding", "for kids", "for a party", "for winter", "for beginners", "for a gift"],
}
STEP_WORDS = "first then carefully measure cut mix stir pour wait check dry rinse attach press hold place".split()


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def bench_retrieval(pool_size: int, queries: int, rng: random.Random) -> None:
    goals = [f"{rng.choice(VERBS)} a {' '.join(rng.sample(NOUNS, rng.randint(1, 4)))}" for _ in range(pool_size)]
    start = time.perf_counter()
    index = ExampleIndex(goals)
    build = time.perf_counter() - start
    times = []
    for _ in range(queries):
        query = f"{rng.choice(VERBS)} a {' '.join(rng.sample(NOUNS, rng.randint(1, 3)))}"
        start = time.perf_counter()
        index.similar(query, n=2)
        times.append((time.perf_counter() - start) * 1000)
    print(
        f"retrieval: pool {pool_size:,} goals, index built in {build:.2f} s; {queries:,} queries: "
        f"p50 {percentile(times, 0.5):.2f} ms, p95 {percentile(times, 0.95):.2f} ms per query"
    )


def bench_filter(n_abstract: int, rng: random.Random) -> None:
    from mining.embeddings import embed_texts, load_embedder

    goals, candidates = [], []
    for a in range(n_abstract):
        base = f"{rng.choice(VERBS)} a {rng.choice(NOUNS)}"
        for constraint_type, options in CONSTRAINTS.items():
            constraint = rng.choice(options)
            key = len(goals)
            goals.append(
                FilterGoal(
                    key=key,
                    group=a,
                    specific_goal=f"{base} {constraint}",
                    constraint=constraint,
                    constraint_type=constraint_type,
                )
            )
            for k in range(2):
                steps = tuple(
                    " ".join(rng.sample(STEP_WORDS, 6)) + (f" {constraint}" if k == 0 else "")
                    for _ in range(rng.randint(4, 8))
                )
                candidates.append(FilterCandidate(key=len(candidates), goal_key=key, steps=steps))
    load_embedder()  # load once, outside the timings
    texts = [g.specific_goal for g in goals] + [script_text(c.steps) for c in candidates]
    start = time.perf_counter()
    embed_texts(texts)
    ideal = time.perf_counter() - start
    start = time.perf_counter()
    verdicts = filter_candidates(goals, candidates, mode="embedding+keyword", embed=lambda t: embed_texts(t))
    total = time.perf_counter() - start
    kept = sum(v.kept for v in verdicts.values())
    print(
        f"filter embedding+keyword: {len(goals):,} specific goals, {len(candidates):,} candidates: {total:.2f} s "
        f"({len(candidates) / total:,.0f} candidates/s); embedding alone {ideal:.2f} s; ratio to ideal "
        f"{total / ideal:.2f}; kept {kept:,} ({kept / len(candidates):.1%})"
    )
    start = time.perf_counter()
    filter_candidates(goals, candidates, mode="keyword", embed=None)
    keyword = time.perf_counter() - start
    print(f"filter keyword: {keyword:.2f} s ({len(candidates) / keyword:,.0f} candidates/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument("--goals", type=int, default=1_000, help="abstract goals (three specific goals each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    bench_retrieval(args.pool, args.queries, rng)
    bench_filter(args.goals, rng)


if __name__ == "__main__":
    main()
