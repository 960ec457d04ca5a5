"""The vocabulary of the constraint-faithfulness kind, from CoScript (Yuan et al., ACL 2023):
the constraint types of Table 1, the three questions of App. D and their answers, and the
error types of Table 10. The definition's rules and the results' figures both speak it.
Pure Python: no Django."""

from __future__ import annotations

# Table 1: the three constraint types, with the paper's description of each.
CONSTRAINT_TYPES = {
    "modifier": "a word, an adjective or a phrase that modifies or constrains an abstract goal "
    "(e.g. Make a chocolate cake)",
    "method": "a tool or specified mode that controls the process for achieving the goal "
    "(e.g. Make a cake with an oven)",
    "intent": "an additional purpose or demand when completing the goal (e.g. Make a cake for a wedding)",
}

# App. D, Figure 10: the three questions, in order, and their answers ("I am not sure").
YES, NO, NOT_SURE = "yes", "no", "not_sure"
ANSWERS = (YES, NO, NOT_SURE)
ANSWER_LABELS: dict[str | None, str] = {YES: "Yes", NO: "No", NOT_SURE: "Not sure"}
QUESTIONS = ("specific_goal_ok", "meets_constraint", "steps_correct")
QUESTION_TEXT = {
    "specific_goal_ok": "Does the specific goal inherit the general goal and contain the constraint?",
    "meets_constraint": "Does the script meet the constraint in the specific goal?",
    "steps_correct": "Are the steps in the script correct in achieving the specific goal?",
}
QUESTION_SHORT = {
    "specific_goal_ok": "Specific goal",
    "meets_constraint": "Meets the constraint",
    "steps_correct": "Steps correct",
}

# Table 10 (and Figure 9): the six error types, their aspect (§4.4: semantic completeness, SE;
# faithfulness to the constraints, FE) and the paper's explanation. Table 10 and Figure 9 name
# the second type "Repeat steps"; §4.4 calls it "repeated step(s)".
ERROR_TYPES: dict[str, dict[str, str]] = {
    "wrong_order": {
        "label": "Wrong order",
        "aspect": "Semantic completeness",
        "explanation": "Steps that are in the wrong order.",
    },
    "repeated_steps": {
        "label": "Repeat steps",
        "aspect": "Semantic completeness",
        "explanation": "Steps that are repeated in the script.",
    },
    "missing_steps": {
        "label": "Missing steps",
        "aspect": "Semantic completeness",
        "explanation": "Important steps that are missing.",
    },
    "no_constraint": {
        "label": "No constraint",
        "aspect": "Faithfulness to constraints",
        "explanation": "Script is unfaithful to the constraint.",
    },
    "incoherent_steps": {
        "label": "Incoherent steps",
        "aspect": "Faithfulness to constraints",
        "explanation": "Steps that are related to the goal, but are not coherent within the script.",
    },
    "unrelated_steps": {
        "label": "Unrelated steps",
        "aspect": "Faithfulness to constraints",
        "explanation": "Steps that are not related to the goal.",
    },
}
OTHER = "other"  # Figure 9: "Others: (Describe what you think is wrong)"
ERROR_CHOICES = (*ERROR_TYPES, OTHER)
MAX_WRONG_STEPS = 100
