"""CoScript's pure parts: reading specific goals and screen answers, the verbs-and-nouns
retrieval of examples, and the over-generate-then-filter decisions (§4.3) on hand-made
embeddings where every similarity is known, then on the bundled all-MiniLM-L6-v2."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.app_errors import InvalidInput
from coscript.constants import GOAL_EXAMPLES
from coscript.filtering import (
    KEPT,
    NO_KEYWORDS,
    NO_SCRIPT,
    OUTRANKED,
    FilterCandidate,
    FilterGoal,
    filter_candidates,
    filter_report,
    keyword_share,
    select_scripts,
)
from coscript.parsing import goal_examples_block, parse_screen_answer, parse_specific_goals, script_examples_block
from coscript.retrieval import ExampleIndex, goal_keywords

# --- reading specific goals ---------------------------------------------------------------


def test_specific_goals_are_read_from_one_line_pairs():
    reading = parse_specific_goals(
        "Constraint: Chocolate; Specific Goal: Make a chocolate cake\nConstraint: Vanilla; Specific Goal: Make a vanilla cake.",
        abstract_goal="Make a cake",
    )
    assert [(g.constraint, g.specific_goal) for g in reading.goals] == [
        ("Chocolate", "Make a chocolate cake"),
        ("Vanilla", "Make a vanilla cake"),
    ]
    assert not reading.dropped


def test_specific_goals_are_read_from_two_line_pairs_with_bullets_and_numbers():
    completion = "1. Constraint: With an oven\n   Specific Goal: Make a cake with an oven\n- Constraint: By using cake mix\nSpecific Goal: Make a cake by using cake mix"
    reading = parse_specific_goals(completion, abstract_goal="Make a cake")
    assert [g.specific_goal for g in reading.goals] == ["Make a cake with an oven", "Make a cake by using cake mix"]


def test_reading_stops_where_the_model_starts_an_abstract_goal_of_its_own():
    completion = (
        "Constraint: For a wedding; Specific Goal: Make a cake for a wedding\n\n"
        "Abstract Goal: Buy flowers\nConstraint: For mother; Specific Goal: Buy flowers for mother"
    )
    reading = parse_specific_goals(completion, abstract_goal="Make a cake")
    assert [g.specific_goal for g in reading.goals] == ["Make a cake for a wedding"]


def test_empty_repeated_unchanged_and_overlong_goals_are_dropped_with_their_reasons():
    seen: set[str] = set()
    first = parse_specific_goals(
        "Constraint: Pink; Specific Goal: Make a pink cake", abstract_goal="Make a cake", seen=seen
    )
    completion = "\n".join(
        [
            "Constraint: ; Specific Goal: Make a blue cake",  # empty constraint
            "Constraint: Plain; Specific Goal: make a cake.",  # the abstract goal itself
            "Constraint: Pink; Specific Goal: Make a PINK cake",  # seen under another constraint type
            f"Constraint: Long; Specific Goal: Make a {'very ' * 80}long cake",
            "Constraint: Blue; Specific Goal: Make a blue cake",
        ]
    )
    second = parse_specific_goals(completion, abstract_goal="Make a cake", seen=seen)
    assert [g.specific_goal for g in first.goals] == ["Make a pink cake"]
    assert [g.specific_goal for g in second.goals] == ["Make a blue cake"]
    assert second.dropped == {"empty": 1, "same_as_abstract_goal": 1, "duplicate": 1, "too_long": 1}


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("Yes", True),
        (" no.", False),
        ("Answer: Yes", True),
        ("<think>maybe yes</think>No", False),
        ("It depends on the goal.", None),
        ("", None),
        ("Yesterday", None),
    ],
)
def test_screen_answers_are_yes_no_or_unreadable(completion, expected):
    assert parse_screen_answer(completion) is expected


def test_every_constraint_type_has_table_13s_three_examples_with_two_goals_each():
    assert set(GOAL_EXAMPLES) == {"modifier", "method", "intent"}
    for examples in GOAL_EXAMPLES.values():
        assert len(examples) == 3 and all(len(pairs) == 2 for _, pairs in examples)
    block = goal_examples_block(GOAL_EXAMPLES["modifier"][:1])
    assert block == (
        "Abstract Goal: Say Goodbye in Different Language\n"
        "Constraint: French; Specific Goal: Say Goodbye in French\n"
        "Constraint: English; Specific Goal: Say Goodbye in English"
    )
    assert script_examples_block([("Make a cake", ["Mix.", "Bake."])]) == "Goal: Make a cake\nSteps:\n1. Mix.\n2. Bake."


# --- retrieval -----------------------------------------------------------------------------


def test_the_first_word_is_the_verb_and_the_other_content_words_are_nouns():
    keys = goal_keywords("How to Make a Birthday Cake for 2 Kids")
    assert keys.verb == "make" and keys.nouns == {"birthday", "cake", "kid"}
    assert goal_keywords("").verb == ""


def test_examples_share_the_most_nouns_then_the_verb_then_come_first_in_the_pool():
    pool = ["Bake bread", "Make a cupcake", "Decorate a cake", "Make a cake", "Make a bed", "Eat cake slowly"]
    index = ExampleIndex(pool)
    # "cake": shared by 2, 3 and 5; among them "Make a cake" (3) also shares the verb.
    assert index.similar("Make a cake", n=2) == [3, 2]
    assert index.similar("Make a chocolate cake", n=3) == [3, 2, 5]
    # Nothing shares a noun: goals with the same verb fill in, in pool order.
    assert index.similar("Make soup", n=2) == [1, 3]
    assert index.similar("Juggle torches", n=2) == []


# --- the filter on hand-made embeddings ----------------------------------------------------

GOALS = [
    FilterGoal(key=1, group="cake", specific_goal="G-chocolate", constraint="Chocolate", constraint_type="modifier"),
    FilterGoal(key=2, group="cake", specific_goal="G-microwave", constraint="In a microwave", constraint_type="method"),
    FilterGoal(key=3, group="cake", specific_goal="G-wedding", constraint="For a wedding", constraint_type="intent"),
    FilterGoal(key=4, group="skin", specific_goal="G-oily", constraint="Oily", constraint_type="modifier"),
]
# Unit vectors: every cosine below is a dot product we can read off.
VECTORS = {
    "G-chocolate": [1, 0, 0],
    "G-microwave": [0, 1, 0],
    "G-wedding": [0, 0, 1],
    "G-oily": [1, 0, 0],
    "Melt the chocolate. Bake.": [0.8, 0.6, 0],  # closest to chocolate: kept
    "Bake it.": [0.6, 0.8, 0],  # closer to microwave than to chocolate: outranked for chocolate
    "Use chocolate. Bake it.": [0.6, 0.8, 0],  # same vector, but carries the keyword "chocolate"
    "Microwave for a wedding.": [0, 0.6, 0.8],  # the wedding script: kept for wedding
    "Blot oily areas.": [0, 1, 0],  # no sibling to lose to
}


def embed(texts):
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


CANDIDATES = [
    FilterCandidate(key=10, goal_key=1, steps=("Melt the chocolate.", "Bake.")),
    FilterCandidate(key=11, goal_key=1, steps=("Bake it.",)),
    FilterCandidate(key=12, goal_key=1, steps=("Use chocolate.", "Bake it.")),
    FilterCandidate(key=13, goal_key=3, steps=("Microwave for a wedding.",)),
    FilterCandidate(key=14, goal_key=2, steps=()),
    FilterCandidate(key=15, goal_key=4, steps=("Blot oily areas.",)),
]


def test_a_candidate_is_kept_only_when_its_target_goal_scores_highest():
    verdicts = filter_candidates(GOALS, CANDIDATES, mode="embedding", embed=embed)
    assert verdicts[10].kept and verdicts[10].target_score == pytest.approx(0.8)
    assert verdicts[10].best_sibling_key == 2 and verdicts[10].best_sibling_score == pytest.approx(0.6)
    assert not verdicts[11].kept and verdicts[11].reason == OUTRANKED
    assert not verdicts[12].kept  # without the bonus the keyword does not help
    assert verdicts[13].kept and verdicts[13].target_score == pytest.approx(0.8)
    assert verdicts[14].reason == NO_SCRIPT and not verdicts[14].kept
    assert verdicts[15].kept and verdicts[15].best_sibling_score is None


def test_the_keyword_bonus_rewards_scripts_that_name_the_constraint():
    # 0.6 + 0.3 x 1 (all of "chocolate") = 0.9 > 0.8 for the microwave goal: kept.
    verdicts = filter_candidates(GOALS, CANDIDATES, mode="embedding+keyword", embed=embed, keyword_bonus=0.3)
    assert verdicts[12].kept and verdicts[12].keyword_share == 1.0
    assert verdicts[12].target_score == pytest.approx(0.9)
    # A bonus too small to close the gap (0.6 + 0.1 < 0.8) keeps it out.
    small = filter_candidates(GOALS, CANDIDATES, mode="embedding+keyword", embed=embed, keyword_bonus=0.1)
    assert not small[12].kept and not small[11].kept


def test_ties_with_a_sibling_are_not_kept():
    vectors = dict(VECTORS, **{"Bake it.": [math.sqrt(0.5), math.sqrt(0.5), 0]})
    verdicts = filter_candidates(
        GOALS,
        CANDIDATES[1:2],
        mode="embedding",
        embed=lambda texts: np.array([vectors[t] for t in texts], dtype=np.float64),
    )
    assert not verdicts[11].kept


def test_keyword_mode_keeps_scripts_with_every_constraint_keyword_and_needs_no_embedding():
    verdicts = filter_candidates(GOALS, CANDIDATES, mode="keyword", embed=None)
    assert [k for k, v in verdicts.items() if v.kept] == [10, 12, 13, 15]
    assert verdicts[11].reason == NO_KEYWORDS
    assert keyword_share("For a birthday party", ["Bake a cake for the party."]) == 0.5
    assert keyword_share("In a microwave", ["Microwave it"]) == 1.0
    assert keyword_share("For a", ["anything"]) == 0.0  # no keywords at all: nothing to contain


def test_embedding_modes_need_an_embedding_function_and_modes_are_checked():
    with pytest.raises(InvalidInput, match="mode: the embedding filter needs an embedding model") as refused:
        filter_candidates(GOALS, CANDIDATES, mode="embedding", embed=None)
    assert list(refused.value.fields) == ["mode"]  # a 400 naming the field where a page or the API asks
    with pytest.raises(InvalidInput, match="mode: must be one of"):
        filter_candidates(GOALS, CANDIDATES, mode="rules", embed=embed)


def test_one_kept_candidate_is_chosen_per_goal_at_random_with_the_seed():
    candidates = [FilterCandidate(key=k, goal_key=1, steps=("x",)) for k in (20, 21, 22)]
    verdicts = {
        20: filter_candidates(GOALS, CANDIDATES, mode="embedding", embed=embed)[10],
        21: filter_candidates(GOALS, CANDIDATES, mode="embedding", embed=embed)[10],
        22: filter_candidates(GOALS, CANDIDATES, mode="embedding", embed=embed)[11],
    }
    chosen = {seed: select_scripts(candidates, verdicts, seed=seed)[1] for seed in range(20)}
    assert set(chosen.values()) == {20, 21}  # never the outranked one, and both kept ones get chosen
    assert select_scripts(candidates, verdicts, seed=3) == select_scripts(candidates, verdicts, seed=3)


def test_the_report_gives_kept_rates_per_constraint_type():
    verdicts = filter_candidates(GOALS, CANDIDATES, mode="embedding", embed=embed)
    selected = select_scripts(CANDIDATES, verdicts, seed=0)
    report = filter_report(GOALS, CANDIDATES, verdicts, selected, mode="embedding")
    modifier, method, intent = (report["by_type"][t] for t in ("modifier", "method", "intent"))
    # modifier: chocolate's 3 candidates (1 kept) + oily's 1 (kept) = 2 / 4; 2 of 2 goals have a script.
    assert (modifier["kept"], modifier["candidates"], modifier["kept_rate"]) == (2, 4, 0.5)
    assert (modifier["goals_with_script"], modifier["goals"]) == (2, 2)
    assert modifier["reasons"] == {KEPT: 2, NO_SCRIPT: 0, OUTRANKED: 2, NO_KEYWORDS: 0}
    assert (method["kept"], method["candidates"], method["goal_rate"]) == (0, 1, 0.0)
    assert method["reasons"][NO_SCRIPT] == 1
    assert (intent["kept_rate"], intent["goal_rate"]) == (1.0, 1.0)
    assert report["total"]["kept"] == 3 and report["total"]["candidates"] == 6
    assert report["kept_without_siblings"] == 1  # the oily-skin script had no sibling goal


# --- the filter on the bundled all-MiniLM-L6-v2 ----------------------------------------------


def test_with_a_real_embedding_model_a_chocolate_script_is_kept_for_the_chocolate_goal_only():
    from mining.embeddings import embed_texts

    goals = [
        FilterGoal(key=n, group="cake", specific_goal=g, constraint=c, constraint_type=t)
        for n, (g, c, t) in enumerate(
            [
                ("Make a chocolate cake", "Chocolate", "modifier"),
                ("Make a cake in the microwave", "In the microwave", "method"),
                ("Make a cake for a wedding", "For a wedding", "intent"),
            ]
        )
    ]
    chocolate_steps = (
        "Gather flour, sugar, eggs and cocoa powder.",
        "Melt the dark chocolate.",
        "Fold the chocolate into the batter.",
        "Bake the chocolate cake for 30 minutes.",
    )
    candidates = [FilterCandidate(key=n, goal_key=n, steps=chocolate_steps) for n in range(3)]
    verdicts = filter_candidates(goals, candidates, mode="embedding", embed=lambda t: embed_texts(t))
    assert [verdicts[n].kept for n in range(3)] == [True, False, False]
