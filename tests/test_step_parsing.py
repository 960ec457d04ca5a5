"""Step parsing of model completions: reasoning traces, <answer> tags, numbering styles,
stray lines, refusals, and the paper's own outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judging.steps import answer_text, numbered_item, parse_completion, parse_steps, strip_reasoning

DEMO = Path(__file__).resolve().parent.parent / "demo" / "data"

# The paper's first few-shot example (App. H.2), as an instruct model would answer it.
DOOR_STEPS = [
    "Stretch the rubber band around one door handle so that it crosses over the latch mechanism.",
    "Twist the band once and loop it over the opposite handle, keeping it taut.",
    "Center the band so it lies flat across the latch plate.",
]

# GPT 5's answer on the whole-plasmid PCR goal (paper Table 18): a refusal followed by
# high-level prose, with no numbered list.
GPT5_REFUSAL = (
    "Sorry, I can’t help with step-by-step experimental instructions for molecular biology procedures.\n"
    "\n"
    "At a high level, whole-plasmid PCR uses a high-fidelity polymerase with primers designed to copy "
    "the entire circular template, generating products that may contain strand nicks.\n"
    "A ligase formulated for post-PCR repair can seal those nicks to yield an intact molecule, while "
    "agarose gel electrophoresis is used to assess product size and purity.\n"
)


def numbered(steps: list[str], style: str = "{n}. {s}") -> str:
    return "\n".join(style.format(n=i, s=s) for i, s in enumerate(steps, start=1))


def test_plain_numbered_answer_gives_the_steps_without_numbers():
    parsed = parse_completion(numbered(DOOR_STEPS))
    assert list(parsed.steps) == DOOR_STEPS
    assert parsed.numbers == (1, 2, 3)
    assert parsed.numbered


def test_reasoning_trace_is_dropped_even_when_it_holds_a_numbered_draft():
    completion = (
        "<think>The goal needs three steps. Draft:\n"
        "1. Put the band on.\n"
        "2. Twist it.\n"
        "Hmm, the examples are more specific; rewrite.</think>\n\n" + numbered(DOOR_STEPS)
    )
    assert parse_steps(completion) == DOOR_STEPS


def test_only_the_text_after_the_last_think_close_counts():
    completion = "<think>first</think>\n1. Draft step.\n<think>second thoughts</think>\n1. Boil water.\n2. Add tea."
    assert parse_steps(completion) == ["Boil water.", "Add tea."]


def test_answer_tags_keep_only_their_inside():
    completion = (
        "<think>Plan it.</think>\n"
        "Here is my answer, in 3 steps:\n"
        "0. (this numbered line is outside the answer)\n"
        "<answer>\n" + numbered(DOOR_STEPS) + "\n</answer>\n"
        "4. Let me know if you need more help."
    )
    parsed = parse_completion(completion)
    assert list(parsed.steps) == DOOR_STEPS
    assert parsed.numbers == (1, 2, 3)


def test_answer_tags_without_numbering_fall_back_to_lines_inside_the_tags():
    completion = "Intro outside.\n<answer>\nBoil water.\n\nAdd tea.\n</answer>"
    assert parse_steps(completion) == ["Boil water.", "Add tea."]


def test_an_unclosed_answer_tag_keeps_what_follows_it():
    # A completion cut off before </answer>.
    assert parse_steps("<answer>\n1. Boil water.\n2. Add tea.") == ["Boil water.", "Add tea."]


def test_the_last_of_several_answer_blocks_is_kept():
    completion = "<answer>1. Old.</answer>\n<answer>\n1. Boil water.\n2. Add tea.\n</answer>"
    assert parse_steps(completion) == ["Boil water.", "Add tea."]


@pytest.mark.parametrize(
    "style",
    ["{n}. {s}", "{n}) {s}", "{n}: {s}", "{n} - {s}", "   {n}. {s}", "\t{n}) {s}", "{n}.   {s}   "],
    ids=["dot", "paren", "colon", "space-hyphen", "leading-spaces", "leading-tab", "extra-spaces"],
)
def test_every_numbering_style_of_the_protocol_is_recognised(style):
    parsed = parse_completion(numbered(DOOR_STEPS, style))
    assert list(parsed.steps) == DOOR_STEPS
    assert parsed.numbers == (1, 2, 3)


def test_stray_blank_lines_and_prose_around_the_list_are_ignored():
    completion = (
        "Sure! Here are the 3 steps:\n\n"
        "1. Boil water.\n\n\n"
        "2. Steep the tea for 3 minutes.\n"
        "   \n"
        "3) Remove the bag.\n\n"
        "Enjoy your tea!\n"
    )
    assert parse_steps(completion) == ["Boil water.", "Steep the tea for 3 minutes.", "Remove the bag."]


def test_windows_line_endings_are_handled():
    assert parse_steps("1. Boil water.\r\n2. Add tea.\r\n") == ["Boil water.", "Add tea."]


def test_numbers_as_written_are_kept_for_the_format_verifier():
    parsed = parse_completion("1. Boil water.\n3. Add tea.\n3. Stir.")
    assert parsed.steps == ("Boil water.", "Add tea.", "Stir.")
    assert parsed.numbers == (1, 3, 3)


def test_multi_digit_numbers_are_removed():
    steps = [f"Step number {i}." for i in range(1, 13)]
    parsed = parse_completion(numbered(steps))
    assert list(parsed.steps) == steps
    assert parsed.numbers == tuple(range(1, 13))


def test_quantities_at_the_start_of_a_line_are_not_item_numbers():
    assert numbered_item("1.5 cups of flour go in first.") is None
    assert numbered_item("3-4 eggs, beaten.") is None
    # "2024:the year" is item 2024, as the reference CLI reads it (its text starts with a
    # letter); tests/test_reference_step_parsing.py lists where the two rules differ.
    assert numbered_item("2024:the year") == (2024, "the year")
    # A numbered step may itself start with a quantity.
    assert numbered_item("2. 1.5 cups of flour go in.") == (2, "1.5 cups of flour go in.")
    assert parse_steps("1.5 cups of flour.\n2 eggs.") == ["1.5 cups of flour.", "2 eggs."]


def test_a_number_with_no_text_is_not_a_step():
    assert numbered_item("1.") is None
    assert parse_steps("1.\n2. Add tea.") == ["Add tea."]


def test_gpt5_refusal_without_a_list_becomes_one_step_per_non_empty_line():
    parsed = parse_completion(GPT5_REFUSAL)
    assert not parsed.numbered
    assert parsed.numbers == ()
    assert list(parsed.steps) == [line for line in GPT5_REFUSAL.splitlines() if line.strip()]
    assert len(parsed.steps) == 3
    assert parsed.steps[0].startswith("Sorry, I can’t help")


def test_base_model_continuation_stopped_at_a_blank_line():
    # A base model continues the few-shot prompt ("Exactly 3 steps ...:\n") and decoding
    # stops at "\n\n", so the completion is the bare list with a leading newline.
    completion = "\n" + numbered(DOOR_STEPS)
    assert parse_steps(completion) == DOOR_STEPS


def test_an_empty_completion_has_no_steps():
    assert parse_steps("") == []
    assert parse_steps("<think>ran out of budget</think>") == []
    assert parse_steps("\n  \n") == []


def test_a_completion_must_be_text():
    with pytest.raises(TypeError):
        parse_completion(None)  # type: ignore[arg-type]


def test_strip_reasoning_and_answer_text_helpers():
    assert strip_reasoning("a</think>b</think>c") == "c"
    assert strip_reasoning("no trace") == "no trace"
    assert answer_text("x</think>pre<ANSWER>in</ANSWER>post") == "in"


def test_the_papers_own_generations_survive_a_round_trip_through_a_numbered_answer():
    records = [json.loads(line) for line in (DEMO / "generations.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 10
    for record in records:
        steps = record["predicted_steps"]
        completion = "<think>Let me plan the procedure.</think>\n" + numbered(steps) + "\n"
        assert parse_steps(completion) == steps, record["model"]
