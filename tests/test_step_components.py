"""Steps as (action, objects, parameters): checking a triple from JSON with the field
named, and the rule-based fallback that reads a plain step sentence offline."""

from __future__ import annotations

import pytest

from judging.components import (
    ComponentsError,
    StepComponents,
    components_from_dict,
    components_list,
    rule_based_components,
)


def test_a_triple_is_read_from_a_json_object():
    value = {"action": " mix ", "objects": ["flour", "sugar"], "parameters": ["in a bowl"]}
    assert components_from_dict(value) == StepComponents("mix", ("flour", "sugar"), ("in a bowl",))
    assert components_from_dict(value).as_dict() == {
        "action": "mix",
        "objects": ["flour", "sugar"],
        "parameters": ["in a bowl"],
    }


@pytest.mark.parametrize(
    "value, field, problem",
    [
        ({"objects": [], "parameters": []}, "action", "missing"),
        ({"action": "mix", "objects": [], "parameters": [], "notes": []}, "notes", "unexpected key"),
        ({"action": 3, "objects": [], "parameters": []}, "action", "expected a non-empty string"),
        ({"action": "mix", "objects": None, "parameters": []}, "objects", "expected a list of strings, got null"),
        ({"action": "mix", "objects": [""], "parameters": []}, "objects[0]", "expected a non-empty string"),
        ({"action": "mix", "objects": [], "parameters": ["ok", 5]}, "parameters[1]", "expected a string, got int"),
    ],
)
def test_a_malformed_triple_names_its_field(value, field, problem):
    with pytest.raises(ComponentsError) as caught:
        components_from_dict(value)
    assert caught.value.field == field
    assert caught.value.problem.startswith(problem)


def test_a_list_of_triples_names_the_index_and_field():
    with pytest.raises(ComponentsError) as caught:
        components_list(
            [
                {"action": "mix", "objects": [], "parameters": []},
                {"action": "stir", "objects": "pot", "parameters": []},
            ],
            "gold",
        )
    assert caught.value.field == "gold[1].objects"
    with pytest.raises(ComponentsError) as caught:
        components_list([["mix"]], "pred")
    assert caught.value.field == "pred[0]"
    with pytest.raises(ComponentsError) as caught:
        components_list({"action": "mix"}, "pred")
    assert caught.value.field == "pred"


# ---------------------------------------------------------------------------------------
# The rule-based fallback
# ---------------------------------------------------------------------------------------


def test_leading_verb_is_the_action_and_the_object_phrase_follows():
    assert rule_based_components("Preheat the oven to 180 °C.") == StepComponents("preheat", ("oven",), ("to 180 °c",))


def test_objects_split_on_and_and_commas_and_parameters_on_prepositions():
    result = rule_based_components("Mix the flour, sugar and eggs in a large bowl for 2 minutes.")
    assert result == StepComponents("mix", ("flour", "sugar", "eggs"), ("in a large bowl", "for 2 minutes"))


def test_list_markers_fillers_and_a_leading_clause_are_skipped():
    assert rule_based_components("3. Then add the pasta.").action == "add"
    assert rule_based_components("Step 2: Carefully remove the supernatant with a pipette.") == StepComponents(
        "remove",
        ("supernatant",),
        ("with a pipette",),
    )
    assert rule_based_components("Once the water boils, add the pasta.").action == "add"


def test_trailing_adverbs_become_parameters_and_of_stays_inside_its_phrase():
    result = rule_based_components("Wash the spheroids twice with 500 µl of ice-cold D-PBS(+).")
    assert result == StepComponents("wash", ("spheroids",), ("twice", "with 500 µl of ice-cold d-pbs(+)"))


def test_a_step_with_no_object_or_parameter():
    assert rule_based_components("Serve.") == StepComponents("serve", (), ())


def test_a_step_with_no_words_is_refused():
    with pytest.raises(ValueError, match="no action"):
        rule_based_components(" 4. ")
