"""A small world for CoScript tests: mined procedures to take abstract goals from, and a
scripted model that answers the three CoScript prompts the way a real model would (specific
goals per constraint type, Yes/No to the sensitive screen, one faithful and one unfaithful
script per specific goal)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.utils.text import slugify

from coscript.constants import MAX_K
from mining.models import Procedure, Topic
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

# Abstract goal -> (topic, steps).
PROCEDURES = {
    "Make a cake": (
        "Food & Dining",
        [
            "Gather your ingredients.",
            "Preheat the oven to 350 degrees.",
            "Mix the flour, sugar and eggs.",
            "Pour the batter into a pan.",
            "Bake for 30 minutes.",
        ],
    ),
    "Make a cupcake": (
        "Food & Dining",
        ["Line a muffin tin.", "Mix the batter.", "Fill the cups halfway.", "Bake for 20 minutes.", "Frost when cool."],
    ),
    "Clean your skin": (
        "Health",
        ["Wet your face.", "Apply a cleanser.", "Rub in small circles.", "Rinse with water.", "Pat dry with a towel."],
    ),
    "Wash a car": (
        "Cars & Other Vehicles",
        [
            "Park in the shade.",
            "Rinse the car.",
            "Soap it from the top down.",
            "Rinse again.",
            "Dry with a microfiber cloth.",
        ],
    ),
}

# Abstract goal -> constraint type -> the pairs the scripted model proposes.
GOALS = {
    "Make a cake": {
        "modifier": [("Chocolate", "Make a chocolate cake"), ("Vanilla", "Make a vanilla cake")],
        "method": [("In a microwave", "Make a cake in a microwave"), ("Chocolate", "Make a chocolate cake")],
        "intent": [("For diabetics", "Make a cake for diabetics"), ("For a wedding", "Make a cake for a wedding")],
    },
    "Clean your skin": {
        "modifier": [("Oily", "Clean oily skin")],
        "method": [("With medication", "Clean your skin with medication"), ("With soap", "Clean your skin with soap")],
        "intent": [("Before bed", "Clean your skin before bed")],
    },
}

# Specific goal -> the faithful script (candidate 0); candidate 1 gets a generic one.
FAITHFUL = {
    "Make a chocolate cake": [
        "Gather flour, sugar, eggs and cocoa powder.",
        "Melt the chocolate.",
        "Fold the chocolate into the batter.",
        "Bake the chocolate cake for 30 minutes.",
    ],
    "Make a vanilla cake": [
        "Gather flour, sugar and eggs.",
        "Add two teaspoons of vanilla extract.",
        "Beat the vanilla batter.",
        "Bake the vanilla cake for 30 minutes.",
    ],
    "Make a cake in a microwave": [
        "Mix the batter in a microwave-safe mug.",
        "Put the mug in the microwave.",
        "Microwave on high for 90 seconds.",
        "Let the microwave cake cool.",
    ],
    "Make a cake for diabetics": [
        "Replace sugar with a sweetener safe for diabetics.",
        "Use almond flour.",
        "Bake the low-sugar cake for diabetics.",
        "Check the carbs per slice.",
    ],
    "Make a cake for a wedding": [
        "Plan the wedding cake tiers.",
        "Bake three layers.",
        "Stack the tiers with dowels.",
        "Decorate with wedding flowers.",
    ],
    "Clean oily skin": [
        "Use an oil-free cleanser for oily skin.",
        "Wash twice a day.",
        "Blot the oily areas.",
        "Apply an oil-free moisturiser.",
    ],
    "Clean your skin with medication": [
        "Ask a doctor about the medication.",
        "Apply the medication cream.",
        "Rinse after ten minutes.",
        "Repeat as prescribed.",
    ],
    "Clean your skin with soap": [
        "Wet your skin.",
        "Lather mild soap in your hands.",
        "Rub the soap in circles.",
        "Rinse the soap off.",
    ],
    "Clean your skin before bed": [
        "Remove makeup before bed.",
        "Wash with a gentle cleanser before bed.",
        "Apply a night cream.",
        "Go to bed with a clean face.",
    ],
}
GENERIC = ["Get ready.", "Do the task carefully.", "Check the result.", "Clean up."]


def make_procedures(split: str = "bench") -> dict[str, Procedure]:
    made = {}
    for n, (goal, (topic_name, steps)) in enumerate(PROCEDURES.items()):
        topic, _ = Topic.objects.get_or_create(name=topic_name, defaults={"slug": slugify(topic_name)})
        made[goal] = Procedure.objects.create(
            topic=topic, goal=goal, steps=steps, resources=["an oven"], source_example_id=f"doc-{n}", split=split
        )
    return made


def _specific_goal(text: str) -> str:
    found = re.search(r"Specific Goal: (.+)\nSteps:\s*$", text)
    assert found is not None, text
    return found.group(1)


def answer(body: dict[str, Any]) -> Reply:
    """The scripted model: which prompt it is is read from the prompt's own words."""
    text = last_user_message(body)
    if "Create possible Specific Goals" in text:
        abstract = re.findall(r"Abstract Goal: (.+)", text)[-1].strip()
        constraint = re.search(r"Constraint Type is (\w+)", text)
        assert constraint is not None, text
        constraint_type = constraint.group(1).lower()
        pairs = GOALS.get(abstract, {}).get(constraint_type, [])
        return Reply("\n".join(f"Constraint: {c}; Specific Goal: {g}" for c, g in pairs))
    if "sensitive and high-risk domains" in text:
        goal = re.findall(r"Goal: (.+)", text)[-1]
        return Reply("Yes" if "medication" in goal else "No")
    if "List the steps of" in text:
        goal = _specific_goal(text)
        k = int(body.get("seed", 0)) % MAX_K
        steps = FAITHFUL.get(goal, GENERIC) if k == 0 else GENERIC
        return Reply("\n".join(f"{n}. {s}" for n, s in enumerate(steps, start=1)))
    return Reply("I cannot help with that.")


@contextmanager
def scripted_server(settings) -> Iterator[ScriptedLLM]:
    """The scripted server on 127.0.0.1 answering as :func:`answer`, set as the endpoint of the
    ``generate`` role, with short back-offs and two attempts per request."""
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    settings.LLM_MAX_ATTEMPTS = 2
    with ScriptedLLM() as scripted:
        roles = dict(settings.LLM_ROLES)
        roles["generate"] = {
            "base_url": scripted.base_url,
            "api_key": "k",
            "model": "m",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        scripted.default = answer
        yield scripted
