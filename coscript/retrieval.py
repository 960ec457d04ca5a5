"""Retrieval of the in-context examples of script generation (CoScript §4.3: "we back-trace
its abstract goal and extract the verbs ("make") and nouns ("cake") ... Then we use the verbs
and nouns as keywords to retrieve two similar goals as examples"). Pure Python, no Django.

Without a tagger, the rule is: a how-to goal starts with its verb, so the goal's first word
(after a leading "how to") is the verb and every other content word (stopwords and numbers
left out, words reduced by :func:`mining.words.lemma`) is a noun. A pool goal scores
(shared nouns, same verb); the two highest-scoring goals with at least one shared word are
the examples, ties going to the lower pool index. The abstract goal's own procedure may be
one of them, as in the paper's Table 2, where "make a cake" is an example for "make a
chocolate cake"."""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from mining.words import STOPWORDS, lemma, words


@dataclass(frozen=True)
class GoalKeywords:
    verb: str
    nouns: frozenset[str]


def goal_keywords(goal: str) -> GoalKeywords:
    tokens = words(goal)
    if tokens[:2] == ["how", "to"]:
        tokens = tokens[2:]
    if not tokens:
        return GoalKeywords(verb="", nouns=frozenset())
    verb = lemma(tokens[0])
    nouns = frozenset(lemma(t) for t in tokens[1:] if t not in STOPWORDS and not t.isdigit())
    return GoalKeywords(verb=verb, nouns=nouns)


class ExampleIndex:
    """Pool goals indexed by verb and noun; ``similar(goal)`` gives pool indices, best first."""

    def __init__(self, goals: Sequence[str]):
        self.keywords = [goal_keywords(goal) for goal in goals]
        self.by_noun: dict[str, list[int]] = defaultdict(list)
        self.by_verb: dict[str, list[int]] = defaultdict(list)
        for index, keys in enumerate(self.keywords):
            for noun in keys.nouns:
                self.by_noun[noun].append(index)
            if keys.verb:
                self.by_verb[keys.verb].append(index)

    def similar(self, goal: str, *, n: int) -> list[int]:
        keys = goal_keywords(goal)
        shared: Counter[int] = Counter()
        for noun in keys.nouns:
            shared.update(self.by_noun.get(noun, ()))
        verb = keys.verb
        ranked = heapq.nsmallest(
            n, shared, key=lambda i: (-shared[i], -(bool(verb) and self.keywords[i].verb == verb), i)
        )
        if len(ranked) < n and verb:  # goals that share only the verb come last, lowest index first
            chosen = set(ranked)
            for index in self.by_verb.get(verb, ()):
                if index not in chosen:
                    ranked.append(index)
                    if len(ranked) == n:
                        break
        return ranked
