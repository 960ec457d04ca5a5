"""The Sketch-and-Fill reader and its format gate (Thoth/SciRecipe §3.2, §3.3.2, App. L):
well-formed answers in the layouts the paper prints, and broken ones, each refused with
the section, step and line of the problem."""

from __future__ import annotations

import pytest

from judging.components import StepComponents
from judging.sketch_fill import SketchFillProblem, parse_sketch_fill

# The worked example of the paper's generation prompt (App. L, Figure 20).
PAPER_EXAMPLE = """<think>
Detach the cells, wash them, then pellet them.
</think>
<key>
Step 1: {"action": "detach", "objects": ["bmdcs"], "parameters": ["1x pbs-5 mm edta", "10 min", "37 °c"]}
Step 2: {"action": "wash", "objects": ["cells"], "parameters": ["1x pbs", "twice"]}
Step 3: {"action": "centrifuge", "objects": ["cells"], "parameters": ["367xg", "10 min"]}
</key>
<orc>
Step 1: Detach bmdcs with 1x pbs-5 mm edta for 10 min at 37 °c.
Step 2: Wash the cells with 1x pbs twice.
Step 3: Centrifuge the cells at 367xg for 10 min.
</orc>
<note>
Work in a biosafety cabinet.
</note>"""


def _answer(key_lines: list[str], orc_lines: list[str] | None = None) -> str:
    orc_lines = orc_lines if orc_lines is not None else [f"Step {n}: Do it." for n in range(1, len(key_lines) + 1)]
    return (
        "<think>t</think>\n<key>\n"
        + "\n".join(key_lines)
        + "\n</key>\n<orc>\n"
        + "\n".join(orc_lines)
        + "\n</orc>\n<note>n</note>"
    )


def _only_problem(text: str) -> SketchFillProblem:
    parsed = parse_sketch_fill(text)
    assert not parsed.format_ok
    assert len(parsed.problems) == 1, [str(p) for p in parsed.problems]
    return parsed.problems[0]


# ---------------------------------------------------------------------------------------
# Well-formed answers
# ---------------------------------------------------------------------------------------


def test_paper_prompt_example_is_read_step_by_step():
    parsed = parse_sketch_fill(PAPER_EXAMPLE)
    assert parsed.format_ok and parsed.problems == ()
    assert parsed.key_steps[0].components == StepComponents(
        "detach",
        ("bmdcs",),
        ("1x pbs-5 mm edta", "10 min", "37 °c"),
    )
    assert [step.number for step in parsed.key_steps] == [1, 2, 3]
    assert parsed.actions == ("detach", "wash", "centrifuge")
    assert [step.text for step in parsed.orc_steps] == [
        "Detach bmdcs with 1x pbs-5 mm edta for 10 min at 37 °c.",
        "Wash the cells with 1x pbs twice.",
        "Centrifuge the cells at 367xg for 10 min.",
    ]
    assert parsed.think == "Detach the cells, wash them, then pellet them."
    assert parsed.note == "Work in a biosafety cabinet."
    # Lines are those of the whole answer: <key>'s first step is on line 5.
    assert parsed.key_steps[0].line == 5 and parsed.orc_steps[2].line == 12


def test_bulleted_steps_in_code_fences_are_read_as_in_the_papers_figures():
    # Figure 7 bullets every step with "- "; Figure 8 wraps <key> in a code fence.
    text = _answer(
        ["```", '- Step 1: {"action": "remove", "objects": ["medium"], "parameters": []}', "```"],
        ["- Step 1: Remove the medium."],
    )
    parsed = parse_sketch_fill(text)
    assert parsed.format_ok
    assert parsed.key_steps[0].components.action == "remove"
    assert parsed.orc_steps[0].text == "Remove the medium."


def test_empty_object_for_parameters_is_an_empty_list_as_in_figure_7():
    parsed = parse_sketch_fill(_answer(['Step 1: {"action": "remove", "objects": ["medium"], "parameters": {}}']))
    assert parsed.format_ok
    assert parsed.key_steps[0].components.parameters == ()


def test_a_step_may_wrap_onto_following_lines():
    text = _answer(
        ['Step 1: {"action": "stir",', '  "objects": ["sauce"],', '  "parameters": ["2 min"]}'],
        ["Step 1: Stir the sauce", "for 2 min."],
    )
    parsed = parse_sketch_fill(text)
    assert parsed.format_ok
    assert parsed.key_steps[0].components == StepComponents("stir", ("sauce",), ("2 min",))
    assert parsed.orc_steps[0].text == "Stir the sauce for 2 min."


def test_text_outside_the_sections_and_tag_case_are_ignored():
    text = (
        "<question>How?</question>\n" + PAPER_EXAMPLE.replace("<key>", "<KEY>").replace("</orc>", "</ORC>") + "\nDone."
    )
    parsed = parse_sketch_fill(text)
    assert parsed.format_ok
    assert len(parsed.orc_steps) == 3


def test_empty_think_and_note_pass_the_format_gate():
    text = PAPER_EXAMPLE.replace("Detach the cells, wash them, then pellet them.", "").replace(
        "Work in a biosafety cabinet.", ""
    )
    parsed = parse_sketch_fill(text)
    assert parsed.format_ok
    assert parsed.think == "" and parsed.note == ""


def test_numbering_is_read_but_left_to_the_consistency_gate():
    parsed = parse_sketch_fill(
        _answer(
            [
                'Step 1: {"action": "a", "objects": [], "parameters": []}',
                'Step 3: {"action": "b", "objects": [], "parameters": []}',
            ],
            ["Step 1: A.", "Step 3: B."],
        )
    )
    assert parsed.format_ok
    assert [step.number for step in parsed.key_steps] == [1, 3]


# ---------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["think", "key", "orc", "note"])
def test_a_missing_section_fails_the_format_gate_and_is_named(tag):
    start = PAPER_EXAMPLE.index(f"<{tag}>")
    end = PAPER_EXAMPLE.index(f"</{tag}>") + len(f"</{tag}>")
    parsed = parse_sketch_fill(PAPER_EXAMPLE[:start] + PAPER_EXAMPLE[end:])
    assert not parsed.format_ok
    missing = [p for p in parsed.problems if p.section == tag]
    assert missing and "missing" in missing[0].message
    assert str(missing[0]).startswith(f"<{tag}>: ")


def test_sections_out_of_order_fail_the_format_gate():
    key = PAPER_EXAMPLE[PAPER_EXAMPLE.index("<key>") : PAPER_EXAMPLE.index("</key>") + 6]
    orc = PAPER_EXAMPLE[PAPER_EXAMPLE.index("<orc>") : PAPER_EXAMPLE.index("</orc>") + 6]
    swapped = PAPER_EXAMPLE.replace(key, "@@").replace(orc, key).replace("@@", orc)
    problem = _only_problem(swapped)
    assert problem.section is None
    assert "found <think>, <orc>, <key>, <note>" in problem.message


def test_a_repeated_section_fails_the_format_gate():
    problem = _only_problem(PAPER_EXAMPLE + "\n<note>again</note>")
    assert problem.section == "note"
    assert "<note> 2 time(s)" in problem.message


def test_an_unclosed_section_is_refused_with_its_line():
    problem = _only_problem(PAPER_EXAMPLE.replace("</note>", ""))
    assert problem.section == "note"
    assert "</note> 0 time(s)" in problem.message
    assert problem.line == PAPER_EXAMPLE.split("\n").index("<note>") + 1


def test_a_section_nested_in_another_fails_the_format_gate():
    nested = (
        "<think>plan\n<key>\n"
        'Step 1: {"action": "mix", "objects": [], "parameters": []}\n'
        "</key>\n</think>\n<orc>\nStep 1: Mix.\n</orc>\n<note></note>"
    )
    parsed = parse_sketch_fill(nested)
    assert not parsed.format_ok
    assert any("out of order or nested" in p.message for p in parsed.problems)


def test_key_without_steps_fails_the_format_gate():
    problem = _only_problem(_answer([], ["Step 1: Mix."]))
    assert problem.section == "key"
    assert "no steps" in problem.message


def test_text_before_the_first_step_is_refused_with_its_line():
    text = _answer(["Here is the plan:", 'Step 1: {"action": "mix", "objects": [], "parameters": []}'])
    problem = _only_problem(text)
    assert (problem.section, problem.step, problem.line) == ("key", None, 3)
    assert "expected a line 'Step N: ...', got 'Here is the plan:'" in problem.message


def test_an_orc_step_without_a_sentence_is_refused():
    problem = _only_problem(_answer(['Step 1: {"action": "mix", "objects": [], "parameters": []}'], ["Step 1:"]))
    assert (problem.section, problem.step) == ("orc", 1)
    assert "no sentence" in problem.message


# ---------------------------------------------------------------------------------------
# <key> steps: double-quoted dicts with exactly three keys
# ---------------------------------------------------------------------------------------


def _key_problem(step_json: str) -> SketchFillProblem:
    ok = 'Step 1: {"action": "add", "objects": ["salt"], "parameters": []}'
    problem = _only_problem(_answer([ok, f"Step 2: {step_json}"]))
    assert (problem.section, problem.step, problem.line) == ("key", 2, 4)
    return problem


def test_single_quoted_dict_is_refused_as_not_json():
    problem = _key_problem("{'action': 'mix', 'objects': [], 'parameters': []}")
    assert "not a double-quoted JSON object" in problem.message
    assert "single quotes" in problem.message


def test_missing_key_is_named():
    problem = _key_problem('{"action": "mix", "objects": []}')
    assert problem.message == "field 'parameters': missing"


def test_extra_key_is_named():
    problem = _key_problem('{"action": "mix", "objects": [], "parameters": [], "time": "5 min"}')
    assert problem.message.startswith("field 'time': unexpected key")


def test_repeated_key_is_refused():
    problem = _key_problem('{"action": "mix", "action": "stir", "objects": [], "parameters": []}')
    assert problem.message == "field 'action': repeated key"


def test_objects_must_be_a_list_of_strings():
    assert _key_problem('{"action": "mix", "objects": "flour", "parameters": []}').message == (
        "field 'objects': expected a list of strings, got str"
    )
    assert _key_problem('{"action": "mix", "objects": ["flour", 2], "parameters": []}').message == (
        "field 'objects[1]': expected a string, got int"
    )


def test_a_non_empty_object_for_parameters_is_refused():
    problem = _key_problem('{"action": "mix", "objects": [], "parameters": {"time": "5 min"}}')
    assert problem.message == "field 'parameters': expected a list of strings, got dict"


def test_empty_action_is_refused():
    assert (
        "field 'action': expected a non-empty string"
        in _key_problem('{"action": " ", "objects": [], "parameters": []}').message
    )


def test_two_objects_on_one_step_are_refused():
    problem = _key_problem(
        '{"action": "mix", "objects": [], "parameters": []} {"action": "stir", "objects": [], "parameters": []}'
    )
    assert "text after the JSON object" in problem.message


def test_prose_instead_of_json_is_refused():
    problem = _key_problem("Mix the flour.")
    assert "expected a JSON object" in problem.message


def test_every_problem_is_listed_not_only_the_first():
    text = _answer(
        ["Step 1: {'action': 'mix'}", 'Step 2: {"action": "stir", "objects": []}'],
        ["Step 1: Mix.", "Step 2:"],
    )
    parsed = parse_sketch_fill(text)
    assert [(p.section, p.step) for p in parsed.problems] == [("key", 1), ("key", 2), ("orc", 2)]
    # The readable steps are still returned; the unreadable ones are left out.
    assert parsed.key_steps == () and [s.number for s in parsed.orc_steps] == [1]


def test_problem_text_says_section_step_and_line():
    problem = SketchFillProblem("key", 3, 7, "field 'objects': missing")
    assert str(problem) == "<key>, Step 3 (line 7): field 'objects': missing"
    assert str(SketchFillProblem(None, None, None, "out of order")) == "out of order"
    assert str(SketchFillProblem("orc", None, 4, "x")) == "<orc> (line 4): x"
