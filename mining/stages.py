"""The six How2Mine stages (How2Everything §3.2, App. B.3, App. H.1) as small units with one job.

A document's procedure-in-progress is a :class:`Draft` (goal, steps, resources). Each
stage looks at the draft and decides; the five LLM stages say what to ask
(:meth:`LLMStage.prompt_values`) and what an answer means (:meth:`LLMStage.judge`); the
heuristics stage decides on its own (:meth:`HeuristicsStage.check`). A walk takes them
through one base (``mining/walk_stages.py``); the runner (``mining/runner.py`` and the
modules it names) does everything else: prompts, calls, storage, counters, resume.

Verdicts are ``passed`` (the draft moves on, possibly changed) or ``rejected`` with the
stage's reason. A draft carries the steps and resources exactly as the stage that made
them answered (goals are stripped), because the next prompts show them so, as the
reference CLI's do; :func:`procedure_fields` cleans them for the stored procedure. Failures of the call itself (``parse_failed``, ``truncated``,
``refused``, ``api_error``) never reach a stage: they are kept apart by the runner and are
never counted as rejections.

Pure Python, no Django imports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mining.heuristics import HeuristicsFilter
from mining.stage_schemas import FINAL_VALIDATION_QUESTIONS, STAGE_SCHEMAS

# Stage order of How2Everything §3.2: (1) extraction, (2) heuristics, (3) LLM filter,
# (4) rewrite and resource extraction, (5) final validation.
PIPELINE: tuple[str, ...] = (
    "extract_procedure",
    "heuristics",
    "llm_filter",
    "rewrite",
    "extract_resources",
    "final_validation",
)
LLM_STAGES: tuple[str, ...] = tuple(stage for stage in PIPELINE if stage != "heuristics")

PASSED = "passed"
REJECTED = "rejected"


@dataclass(frozen=True)
class Draft:
    """The procedure as it stands after the stages so far."""

    document: str = ""
    goal: str = ""
    steps: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageVerdict:
    """What a mining stage decided about one document: passed or rejected (with the reason),
    and the draft procedure as it stands after the stage."""

    status: str  # PASSED or REJECTED
    reason: str = ""
    draft: Draft = field(default_factory=Draft)
    details: dict[str, Any] = field(default_factory=dict)  # e.g. the repetition rates

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def numbered_steps(steps: tuple[str, ...] | list[str]) -> str:
    """Steps as the prompts show them: one line per step, ``1. …``, each step as it is."""
    return "\n".join(f"{n}. {step}" for n, step in enumerate(steps, start=1))


def resource_lines(items: tuple[str, ...] | list[str]) -> str:
    """Resources as the final validation prompt shows them, as the reference CLI does: one
    line per resource, ``- …`` (nothing when there are none), so a resource holding a comma
    ("oil, olive or canola") stays one resource."""
    return "\n".join(f"- {item}" for item in items)


def _clean(items: Any) -> tuple[str, ...]:
    return tuple(s.strip() for s in items if isinstance(s, str) and s.strip())


def _as_answered(items: Any) -> tuple[str, ...]:
    return tuple(s for s in items if isinstance(s, str))


def procedure_fields(draft: Draft) -> dict[str, Any]:
    """The goal, steps and resources a procedure is stored with: steps and resources
    stripped, empty ones dropped, each resource once (first place kept)."""
    return {
        "goal": draft.goal.strip(),
        "steps": list(_clean(draft.steps)),
        "resources": list(dict.fromkeys(_clean(draft.resources))),
    }


class LLMStage:
    """An LLM stage: the values its prompt is filled with, and the meaning of an answer."""

    name: str = ""

    @property
    def schema(self) -> dict[str, Any]:
        return STAGE_SCHEMAS[self.name]

    def prompt_values(self, draft: Draft) -> dict[str, str]:
        return {"goal": draft.goal, "steps": numbered_steps(draft.steps)}

    def judge(self, answer: Mapping[str, Any], draft: Draft) -> StageVerdict:
        raise NotImplementedError


class ExtractStage(LLMStage):
    """§3.2(1): does the document hold a well-formed sequential procedure? If so, its goal and steps."""

    name = "extract_procedure"

    def prompt_values(self, draft: Draft) -> dict[str, str]:
        return {"document": draft.document}

    def judge(self, answer: Mapping[str, Any], draft: Draft) -> StageVerdict:
        goal, steps = str(answer.get("goal") or "").strip(), _as_answered(answer.get("steps") or [])
        # Our prompt's flag, or the reference CLI's (stage_schemas.EXTRACT_FLAGS).
        flag = answer["has_procedure"] if "has_procedure" in answer else answer.get("has_valid_process")
        if not flag:
            return StageVerdict(REJECTED, "no_procedure: the document holds no sequential procedure", draft)
        # has_procedure without content is an answer we can use only as a rejection:
        # there is nothing to carry on with.
        if not goal:
            return StageVerdict(REJECTED, "no_procedure: a procedure was reported without a goal", draft)
        if not _clean(steps):
            return StageVerdict(REJECTED, "no_procedure: a procedure was reported without steps", draft)
        return StageVerdict(PASSED, "", replace(draft, goal=goal, steps=steps))


class HeuristicsStage:
    """§3.2(2), App. B.3: step count and within-procedure n-gram repetition, no LLM."""

    name = "heuristics"

    def __init__(self, *, min_steps: int, max_steps: int):
        self.filter = HeuristicsFilter(min_steps=min_steps, max_steps=max_steps)

    def check(self, draft: Draft) -> StageVerdict:
        result = self.filter.check(draft.steps)
        details = {"repetition": result.repetition}
        if result.passed:
            return StageVerdict(PASSED, "", draft, details)
        return StageVerdict(REJECTED, result.reason, draft, details)


class FilterStage(LLMStage):
    """§3.2(3), Figure 16: true when one of the six exclusion categories applies."""

    name = "llm_filter"

    def judge(self, answer: Mapping[str, Any], draft: Draft) -> StageVerdict:
        if answer.get("judgment"):
            reason = str(answer.get("reason") or "").strip() or "(no reason given)"
            return StageVerdict(REJECTED, f"excluded: {reason}", draft)
        return StageVerdict(PASSED, "", draft)


class RewriteStage(LLMStage):
    """§3.2(4), Figure 17: a specific, deterministic goal and steps under the seven conditions."""

    name = "rewrite"

    def judge(self, answer: Mapping[str, Any], draft: Draft) -> StageVerdict:
        goal, steps = str(answer.get("rewritten_goal") or "").strip(), _as_answered(answer.get("rewritten_steps") or [])
        # An empty rewrite cannot go on to the later stages; it is a genuine outcome of the
        # stage (the schema allowed it), so it is a rejection with that reason.
        if not goal or not _clean(steps):
            missing = "goal" if not goal else "steps"
            return StageVerdict(REJECTED, f"empty_rewrite: the rewrite returned no {missing}", draft)
        return StageVerdict(PASSED, "", replace(draft, goal=goal, steps=steps))


class ResourcesStage(LLMStage):
    """§3.2(4), Figure 18: the resources the steps use (possibly none). Never rejects."""

    name = "extract_resources"

    def judge(self, answer: Mapping[str, Any], draft: Draft) -> StageVerdict:
        # As answered (the final validation prompt shows them so); procedure_fields drops repeats.
        return StageVerdict(PASSED, "", replace(draft, resources=_as_answered(answer.get("resources") or [])))


class ValidationStage(LLMStage):
    """§3.2(5), Figure 19: kept only when all four questions are answered "yes"."""

    name = "final_validation"

    def prompt_values(self, draft: Draft) -> dict[str, str]:
        return {"goal": draft.goal, "resources": resource_lines(draft.resources), "steps": numbered_steps(draft.steps)}

    def judge(self, answer: Mapping[str, Any], draft: Draft) -> StageVerdict:
        failed = [q for q in FINAL_VALIDATION_QUESTIONS if (answer.get(q) or {}).get("answer") != "yes"]
        if not failed:
            return StageVerdict(PASSED, "", draft)
        reasons = "; ".join(f"{q}: {str((answer.get(q) or {}).get('reason') or '').strip() or 'no'}" for q in failed)
        return StageVerdict(REJECTED, f"failed_validation: {reasons}", draft)


LLM_STAGE_CLASSES: dict[str, type[LLMStage]] = {
    cls.name: cls for cls in (ExtractStage, FilterStage, RewriteStage, ResourcesStage, ValidationStage)
}


def reason_code(reason: str) -> str:
    """The stable part of a rejection reason (before the colon), for counting."""
    return reason.split(":", 1)[0].strip()
