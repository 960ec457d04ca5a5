"""The heuristics filter decides as the released How2Mine data was made.

The released data was filtered with this rule for one step: lowercase with ``str.lower()``,
turn every character that is neither a word character (``str.isalnum()`` or ``_``) nor
whitespace into a space, split on whitespace; n-grams (n = 2, 3, 4) within each step,
pooled; rate_n = repeated occurrences / all occurrences, 0.0 when there are none or when
the list has fewer than two steps; reject when rate_4 >= 0.30 or rate_3 >= 0.35 or
rate_2 >= 0.40, after the step count check. ``oracle_decision`` below restates that rule
character by character, independently of ``mining.heuristics``."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.core.management import call_command

from mining.constants import HEURISTICS_NORMALISATION, MAX_STEPS, MIN_STEPS
from mining.heuristics import HeuristicsFilter, normalise_step, prefilter


def oracle_words(step: str) -> list[str]:
    lowered = step.lower()
    kept = "".join(ch if (ch.isalnum() or ch == "_" or ch.isspace()) else " " for ch in lowered)
    return kept.split()


def oracle_rate(steps: list[str], n: int) -> float:
    if len(steps) < 2:
        return 0.0
    grams: list[str] = []
    for step in steps:
        words = oracle_words(step)
        grams.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    if not grams:
        return 0.0
    return sum(c - 1 for c in Counter(grams).values()) / len(grams)


def oracle_decision(steps: list[str], min_steps: int = 5, max_steps: int = 15) -> bool:
    if not min_steps <= len(steps) <= max_steps:
        return False
    return not (oracle_rate(steps, 4) >= 0.3 or oracle_rate(steps, 3) >= 0.35 or oracle_rate(steps, 2) >= 0.4)


def old_decision(steps: list[str]) -> bool:
    return HeuristicsFilter(normalisation="nfkc_casefold").check(steps).passed


# Steps A and A' that differ only in their last word(s) X / X'. With one-word X and X'
# that compare equal: rate_4 = 1/2, rate_3 = 2/5 (rejected); different: rate_4 = 0,
# rate_3 = 1/5, rate_2 = 2/10 (kept).
FILLER = ["Rinse the bowl.", "Dry it.", "Store away."]


def pair(x: str, x2: str) -> list[str]:
    return [f"Now gently fold {x}", f"now gently fold {x2}"] + FILLER


DISAGREEING = {
    "underscore kept in a word": pair("oil_", "oil"),
    "underscore joins two words": pair("the_batter", "the batter"),
    "degree symbol": pair("180 °C", "180 C"),
    "currency and plus signs": pair("$5 + tip", "5 tip"),
    "emoji": pair("dough🙂", "dough"),
    "full-width letters": pair("ＤＯＵＧＨ", "dough"),
    "ligature": pair("ﬂour", "flour"),
    "sharp s": pair("STRASSE", "straße"),
    "combining acute accent": pair("cafe\u0301", "cafe"),
    "precomposed vs combining": pair("caf\u00e9", "cafe\u0301"),
    "zero-width space": pair("dough\u200b", "dough"),
    "zero-width joiner inside a word": pair("dou\u200dgh", "dou gh"),
    "dotted capital I": pair("\u0130ce", "i ce"),
    "superscript digit": pair("m\u00b2", "m2"),
    "math symbols": pair("a=b", "a b"),
}


@pytest.mark.parametrize("steps", list(DISAGREEING.values()), ids=list(DISAGREEING))
def test_where_the_two_normalisations_disagree_the_default_decides_as_the_reference(steps):
    assert old_decision(steps) != oracle_decision(steps)  # the case really discriminates
    result = prefilter(steps)
    assert result.passed == oracle_decision(steps)
    assert result.repetition == {str(n): oracle_rate(steps, n) for n in (2, 3, 4)}


def test_default_words_match_the_reference_rule():
    for text in ["Pre-heat_the OVEN 180°C ＡＢＣ Straße ﬁne café\u0301 x\u200by 🙂ok İ m²", "", "…", "a_b-c"]:
        assert normalise_step(text) == oracle_words(text)


def test_the_defaults_are_the_papers_bounds_with_the_reference_normalisation():
    assert (MIN_STEPS, MAX_STEPS, HEURISTICS_NORMALISATION) == (5, 15, "reference")
    stage = HeuristicsFilter()
    assert (stage.min_steps, stage.max_steps, stage.normalisation) == (5, 15, "reference")
    assert stage.thresholds == {2: 0.40, 3: 0.35, 4: 0.30}


def test_the_old_normalisation_is_still_available_as_an_option():
    assert normalise_step("Ｓｔｉｒ ﬁrmly_now", normalisation="nfkc_casefold") == ["stir", "firmly", "now"]
    assert normalise_step("Ｓｔｉｒ ﬁrmly_now") == ["ｓｔｉｒ", "ﬁrmly_now"]
    with pytest.raises(ValueError, match="normalisation must be one of reference, nfkc_casefold"):
        HeuristicsFilter(normalisation="nfkc")


def test_a_single_step_has_no_repetition_as_in_the_reference():
    # With bounds that let one step through, the reference computes no rate for a list of
    # fewer than two steps; a step repeating itself is kept.
    steps = ["stir the soup stir the soup stir the soup"]
    assert oracle_decision(steps, 1, 15)
    result = HeuristicsFilter(min_steps=1, max_steps=15).check(steps)
    assert result.passed and result.repetition == {"2": 0.0, "3": 0.0, "4": 0.0}


# --- property test: seeded random step lists ------------------------------------------

WORDS = [
    "stir",
    "the",
    "soup",
    "add",
    "salt",
    "oil",
    "heat",
    "pan",
    "dough",
    "bake",
    "Stir",
    "SOUP",
    "café",
    "cafe\u0301",
    "straße",
    "STRASSE",
    "ＳＯＵＰ",
    "ﬂour",
    "flour",
    "\u0130ce",
    "m²",
    "m2",
    "42",
    "½",
]
DECORATIONS = [
    "",
    "",
    "",
    ".",
    ",",
    "!",
    "_",
    "°",
    "$",
    "+",
    "=",
    "🙂",
    "\u200b",
    "\u200d",
    "\u0301",
    "™",
    "'s",
    "…",
    "\u00a0",
    "-",
    "/",
    "©",
    "—",
    "＿",
]
JOINERS = [" ", " ", " ", " ", "_", "-", "\u200b", "\u00a0", "/", "+", "\t", "  "]


def random_step(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 7)):
        word = rng.choice(WORDS)
        if rng.random() < 0.3:
            word = rng.choice(DECORATIONS) + word
        if rng.random() < 0.3:
            word = word + rng.choice(DECORATIONS)
        parts.append(word)
    text = ""
    for index, part in enumerate(parts):
        text += (rng.choice(JOINERS) if index else "") + part
    return text


def random_steps(rng: random.Random) -> list[str]:
    pool = [random_step(rng) for _ in range(rng.randint(1, 6))]
    # drawing steps from a small pool makes repetition near the thresholds common
    return [rng.choice(pool) if rng.random() < 0.5 else random_step(rng) for _ in range(rng.randint(3, 17))]


def test_seeded_random_lists_agree_with_the_reference_rule_at_100_percent():
    rng = random.Random(17)
    stage = HeuristicsFilter()
    lists = [random_steps(rng) for _ in range(5000)]
    agree = sum(stage.check(steps).passed == oracle_decision(steps) for steps in lists)
    old_disagreements = sum(old_decision(steps) != oracle_decision(steps) for steps in lists)
    both = sum(1 for steps in lists if 5 <= len(steps) <= 15)
    assert both > 2000  # most lists reach the repetition checks
    assert old_disagreements > 20  # the generator does hit characters that flip decisions
    assert agree == len(lists)


def test_seeded_random_lists_agree_at_other_bounds_too():
    rng = random.Random(4)
    for _ in range(2000):
        steps = random_steps(rng)
        low = rng.randint(0, 6)
        high = rng.randint(low, 16)
        assert HeuristicsFilter(min_steps=low, max_steps=high).check(steps).passed == oracle_decision(
            steps, low, high
        ), steps


def test_mine_prefilter_offers_the_old_normalisation(tmp_path):
    import json

    steps = pair("oil_", "oil")
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"steps": steps}) + "\n")
    call_command("mine_prefilter", "--input", str(source), "--output", str(tmp_path / "ref.jsonl"))
    call_command(
        "mine_prefilter",
        "--input",
        str(source),
        "--output",
        str(tmp_path / "old.jsonl"),
        "--normalisation",
        "nfkc_casefold",
    )
    ref = json.loads((tmp_path / "ref.jsonl").read_text())["prefilter"]
    old = json.loads((tmp_path / "old.jsonl").read_text())["prefilter"]
    assert ref["passed"] is True and old["passed"] is False
    assert old["reason"] == "repetition_3gram: 0.4000 >= 0.35"
