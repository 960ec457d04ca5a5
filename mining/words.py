"""Word-level text helpers shared by the apps that compare texts by their words (goal-step
filters, CoScript's retrieval and constraint keywords). Pure Python, no Django."""

from __future__ import annotations

import re
import unicodedata

# English function words left out of word comparisons (the goal-step filters follow Zhang et al. 2020,
# App. D: "We exclude stopwords"; CoScript's retrieval keywords use the same list).
STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we were what
when where which while who whom why will with would you your yours yourself yourselves get make use one
""".split()
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def normalise_text(text: str) -> str:
    """The identity of a text for duplicates and leakage: NFKC, casefolded, inner whitespace
    collapsed, surrounding punctuation and spaces removed."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return folded.strip(" .,;:!?\"'()[]")


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def lemma(word: str) -> str:
    """A light suffix-stripping stand-in for spaCy's lemmatiser (App. D), enough to match
    "wash"/"washes"/"washing"/"washed" and "berry"/"berries" without a language model."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    return {lemma(w) for w in words(text) if w not in STOPWORDS and not w.isdigit()}
