"""A scripted LLM for the six How2Mine stages, answering from markers written into the
test documents, so a test decides what each stage does with each document.

A document looks like::

    Brew green tea [d7 reject:llm_filter]
    * Heat the water to 80 degrees (s1)
    * Warm the teapot (s2)
    ...

The first line is the goal with a marker ``[<id> <flags>]``; lines starting with ``* ``
are the steps, each ending in ``(sN)``. Flags:

* ``reject:<stage>``: that stage rejects (extract: no procedure; llm_filter: excluded;
  final_validation: correctness "no"); ``empty:rewrite``: the rewrite returns no steps;
* ``malformed:<stage>``: the stage always answers with text that is not JSON;
* ``truncated:<stage>``: the stage's answers are cut off (finish_reason "length");
* ``flaky:<stage>``: the stage's first answer is not JSON, later ones are fine.

The rewrite appends " (rewritten)" to the goal; the resources are "kettle" and "cup".
The marker travels with the goal through every stage, so each stage's prompt says
which document it is about."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

MARKER = re.compile(r"\[(d\d+)([^\]]*)\]")
STEP = re.compile(r"^\d+\. (.*\(s\d+\).*)$", re.M)


VERBS = (
    "Heat",
    "Rinse",
    "Measure",
    "Stir",
    "Fold",
    "Press",
    "Trim",
    "Drain",
    "Cover",
    "Label",
    "Weigh",
    "Mark",
    "Clamp",
    "Sand",
    "Wipe",
    "Seal",
)
NOUNS = (
    "kettle",
    "bowl",
    "flour",
    "board",
    "ribbon",
    "cloth",
    "hinge",
    "jar",
    "panel",
    "screw",
    "basket",
    "glass",
    "towel",
    "brush",
    "rope",
    "lid",
)


def document_text(doc: str, goal: str, n_steps: int = 6, flags: str = "") -> str:
    offset = int(doc[1:]) if doc[1:].isdigit() else 0
    steps = "\n".join(
        f"* {VERBS[(i + offset) % len(VERBS)]} the {NOUNS[(i * 3 + offset) % len(NOUNS)]} (s{i})"
        for i in range(1, n_steps + 1)
    )
    return f"{goal} [{doc}{' ' + flags if flags else ''}]\n{steps}\n"


def stage_of(body: dict[str, Any]) -> str:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name", "")


class ScriptedMiner:
    """The answering function; also counts requests per (stage, document)."""

    def __init__(self) -> None:
        self.sent: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        stage = stage_of(body)
        text = body["messages"][0]["content"]  # the stage prompt (a re-ask appends messages)
        found = MARKER.search(text)
        doc, flags = (found.group(1), found.group(2).split()) if found else ("?", [])
        with self.lock:
            self.sent[(stage, doc)] += 1
            attempt = self.sent[(stage, doc)]
        if f"malformed:{stage}" in flags or (f"flaky:{stage}" in flags and attempt == 1):
            return Reply("I am not sure how to answer this one.")
        if f"truncated:{stage}" in flags:
            return Reply('{"has_procedure": true, "goal": "Brew', finish_reason="length")
        return Reply(json.dumps(self.answer(stage, text, found, flags)), prompt_tokens=400, completion_tokens=60)

    def answer(self, stage: str, text: str, found: re.Match | None, flags: list[str]) -> dict[str, Any]:
        if stage == "extract_procedure":
            if found is None or "reject:extract_procedure" in flags:
                return {"has_procedure": False, "goal": "", "steps": []}
            line_start = text.rfind("\n", 0, found.start()) + 1
            goal = text[line_start : found.end()].strip()
            steps = [line[2:].strip() for line in text[found.end() :].splitlines() if line.startswith("* ")]
            return {"has_procedure": True, "goal": goal, "steps": steps}
        goal = self._goal(text, found)
        if stage == "llm_filter":
            if "reject:llm_filter" in flags:
                return {"judgment": True, "reason": "It is focused on a named entity."}
            return {"judgment": False, "reason": ""}
        if stage == "rewrite":
            steps = [] if "empty:rewrite" in flags else STEP.findall(text)
            return {
                "rewritten_goal": goal if goal.endswith("(rewritten)") else f"{goal} (rewritten)",
                "rewritten_steps": steps,
            }
        if stage == "extract_resources":
            return {"resources": ["kettle", "cup"]}
        if stage == "final_validation":
            bad = "reject:final_validation" in flags
            verdict = {"answer": "yes", "reason": ""}
            return {
                "correctness": {"answer": "no", "reason": "The steps never reach the goal."} if bad else verdict,
                "sequential": verdict,
                "no_specific_entity": verdict,
                "goal_steps_alignment": verdict,
            }
        return {}

    @staticmethod
    def _goal(text: str, found: re.Match | None) -> str:
        if found is None:
            return ""
        line_start = text.rfind("\n", 0, found.start()) + 1
        line_end = text.find("\n", found.end())
        return text[line_start : line_end if line_end >= 0 else None].strip()


def scripted_miner_server(**kwargs) -> tuple[ScriptedLLM, ScriptedMiner]:
    server = ScriptedLLM(**kwargs)
    miner = ScriptedMiner()
    server.default = miner
    return server, miner


__all__ = ["ScriptedMiner", "scripted_miner_server", "document_text", "stage_of", "last_user_message"]
