"""A folder of prompt files named as the reference CLI names them (``extract_procedures.txt``,
``filter.txt``, ``postprocess.txt``, ``extract_resources.txt``, ``final_filter.txt``,
``inference_base.txt``, ``inference_inst.txt``, ``judge.txt``), named by the one setting
``PROMPTS_DIR``, is picked up by every mining and bench stage; the extraction stage answers
with the field its prompt asks for (``has_valid_process``); and every request sent for a
record is byte-identical to the reference CLI's request for the same record.

The expected requests come from :class:`Reference` below: the reference's rendering rules
written out from its documented behaviour (not the product's code path). The prompt files
are stand-ins written here with the reference's file names and placeholders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from judging.models import Generation
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from llm.prompts import REFERENCE_PROMPT_NAMES, prompt_locate
from mining.models import Procedure, Topic
from mining.procedure_services import topics_ensure
from mining.run_services import mining_run_create
from mining.stage_schemas import stage_schema
from mining.stages import Draft, ExtractStage
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message
from tests.scripted_miner import stage_of
from tests.test_mining_runs import config, execute, make_corpus, point_stages_at

# -- stand-in prompt files: the reference's names and placeholders, our own words ----------

STAND_INS = {
    "extract_procedures.txt": (
        "Below is a web page. Decide whether it teaches one sequential process of at least three "
        "executable steps; if it does, state its goal and list its steps.\n\n"
        "Reply with JSON shaped like this:\n\n"
        '{{\n    "has_valid_process": <boolean>,\n    "goal": <string>,\n    "steps": <string[]>\n}}\n\n'
        "<page>\n{document}\n</page>"
    ),
    "filter.txt": (
        "## Procedure\n\nGoal:\n{goal}\n\nSteps:\n{steps}\n\n## Question\n\n"
        "Is this procedure one of the excluded kinds (named entity, math, UI, creative, "
        'unordered, unreasonable)?\n\nReply as {{"judgment": <boolean>, "reason": <string>}}'
    ),
    "postprocess.txt": (
        "## Procedure\n\nGoal:\n{goal}\n\nSteps:\n{steps}\n\n## Task\n\nMake the goal specific and the "
        'steps deterministic.\n\n{{\n    "rewritten_goal": <string>,\n    "rewritten_steps": <string[]>\n}}'
    ),
    "extract_resources.txt": (
        "Goal:\n{goal}\n\nSteps:\n{steps}\n\nList every external resource the steps use, once each.\n\n"
        '{{\n    "resources": <string[]>\n}}'
    ),
    "final_filter.txt": (
        "## Procedure\n\nGoal:\n{goal}\n\nResources (could be empty):\n{resources}\n\nSteps:\n{steps}\n\n"
        "## Questions\n\ncorrectness, sequential, no_specific_entity, goal_steps_alignment\n\n"
        '{{\n    "correctness": {{"answer": "yes" or "no", "reason": "..."}},\n'
        '    "sequential": {{"answer": "yes" or "no", "reason": "..."}},\n'
        '    "no_specific_entity": {{"answer": "yes" or "no", "reason": "..."}},\n'
        '    "goal_steps_alignment": {{"answer": "yes" or "no", "reason": "..."}}\n}}'
    ),
    "inference_base.txt": (
        "Goal:\nKeep a door from slamming.\n\nResources:\n[rubber band, door]\n\n"
        "Exactly 2 steps to achieve the goal using the given resources:\n1. Loop the band over a handle.\n"
        "2. Stretch it across the latch.\n\nGoal:\n{goal}\n\nResources:\n{resources}\n\n"
        "Exactly {n} steps to achieve the goal using the given resources:\n"
    ),
    "inference_inst.txt": (
        "Write the steps that reach the goal with the resources. Give exactly {n} steps, one short "
        "sentence each, and nothing else.\n\nGoal:\n{goal}\n\nResources:\n{resources}\n\n"
        "{n} steps to achieve the goal using the given resources:\n"
    ),
    "judge.txt": (
        "Compare the candidate L2 with the reference L1 for the goal and list its critical failures.\n\n"
        "Goal:\n{goal}\n\nL1:\n{reference_steps}\n\nL2:\n{steps}\n\n"
        '{{\n  "reasoning": "<string>",\n  "critical_failures": [\n    {{\n      "failure": "<string>",\n'
        '      "L1_steps": [<int>],\n      "L2_steps": [<int>]\n    }}\n  ]\n}}'
    ),
}


@pytest.fixture
def reference_prompts(tmp_path, settings) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    for name, text in STAND_INS.items():
        (folder / name).write_text(text, encoding="utf-8")
    settings.PROMPTS_DIR = str(folder)
    return folder


# -- the oracle: the reference CLI's rendering rules, from its documented behaviour --------


class Reference:
    """How the reference CLI fills its prompt files (str.format) for one record.

    Mining: the document text as it is; the goal stripped; steps as the previous stage
    answered them (not stripped), one line each ``"<i>. <step>"``; in the final filter
    the resources as the resource stage answered them, one line each ``"- <resource>"``
    (nothing when there are none). Generation: goal stripped; steps and resources stripped
    with empty ones dropped (its bench example loader); resources as a JSON list
    (``ensure_ascii=False``, ``"[]"`` when empty); ``n`` the number of steps. Judge: goal and
    both step lists stripped (empty steps dropped), and a line ``Return only valid json.``
    after a blank line at the end. Every request is one user message."""

    def __init__(self, folder: Path):
        self.folder = folder

    def template(self, name: str) -> str:
        return (self.folder / name).read_text(encoding="utf-8")

    @staticmethod
    def numbered(steps: list[str]) -> str:
        return "\n".join(f"{i + 1}. {step}" for i, step in enumerate(steps))

    @staticmethod
    def cleaned(items: list) -> list[str]:
        return [str(item).strip() for item in items if str(item).strip()]

    def extract(self, document: str) -> str:
        return self.template("extract_procedures.txt").format(document=document)

    def filter(self, goal: str, steps: list[str]) -> str:
        return self.template("filter.txt").format(goal=goal.strip(), steps=self.numbered(steps))

    def postprocess(self, goal: str, steps: list[str]) -> str:
        return self.template("postprocess.txt").format(goal=goal.strip(), steps=self.numbered(steps))

    def resources(self, goal: str, steps: list[str]) -> str:
        return self.template("extract_resources.txt").format(goal=goal.strip(), steps=self.numbered(steps))

    def final_filter(self, goal: str, steps: list[str], resources: list[str]) -> str:
        return self.template("final_filter.txt").format(
            goal=goal.strip(), steps=self.numbered(steps), resources="\n".join(f"- {r}" for r in resources)
        )

    def generate(self, style: str, goal: str, steps: list[str], resources: list[str]) -> str:
        kept = self.cleaned(resources)
        return self.template(f"inference_{style}.txt").format(
            goal=goal.strip(),
            resources=json.dumps(kept, ensure_ascii=False) if kept else "[]",
            n=len(self.cleaned(steps)),
        )

    def judge(self, goal: str, reference_steps: list[str], steps: list[str]) -> str:
        text = self.template("judge.txt").format(
            goal=goal.strip(),
            reference_steps=self.numbered(self.cleaned(reference_steps)),
            steps=self.numbered(self.cleaned(steps)),
        )
        return text + "\n\nReturn only valid json."


# -- mining ---------------------------------------------------------------------------

YES = {"answer": "yes", "reason": ""}

# Three documents, each with the answers a server gives when it answers as the reference's
# prompts ask: commas inside a resource and surrounding whitespace (d1), braces in the text
# and no resources at all (d2), a plain one (d3).
MINED: dict[str, dict[str, Any]] = {
    "d1": {
        "document": "How to fry an egg [d1]\nWarm oil, olive or canola, then crack the egg...\n",
        "extract": {
            "has_valid_process": True,
            "goal": "  Fry an egg [d1]  ",
            "steps": [
                "  Pour the oil, olive or canola, into the pan.",
                "Heat the pan over medium heat. ",
                " Crack the egg into the hot oil ",
                "Fry it for three minutes.",
                "Slide the egg onto a plate.",
            ],
        },
        "rewrite": {
            "rewritten_goal": " Fry one egg sunny side up [d1]\n",
            "rewritten_steps": [
                " Pour the oil into the pan.",
                "Heat the pan over medium heat.  ",
                "Crack the egg into the hot oil.",
                "Fry it for three minutes. ",
                "Slide the egg onto a plate.",
            ],
        },
        "resources": {"resources": ["oil, olive or canola", " pan ", "egg", "plate", "pan"]},
    },
    "d2": {
        "document": 'Write a settings file {with braces} [d2]\nOpen an editor and type {"debug": true}...\n',
        "extract": {
            "has_valid_process": True,
            "goal": "Write a settings file {with braces} [d2]",
            "steps": [
                "Open a new text file.",
                'Type {"debug": true} on the first line.',
                "Add {name} on the second line.",
                "Save the file as settings.json.",
                "Close the editor.",
            ],
        },
        "rewrite": {
            "rewritten_goal": "Write a settings file that turns on {debug} [d2]",
            "rewritten_steps": [
                "Open a new text file.",
                'Type {"debug": true} on the first line.',
                "Add {name} on the second line.",
                "Save the file as settings.json.",
                "Close the editor.",
            ],
        },
        "resources": {"resources": []},
    },
    "d3": {
        "document": "Repot a houseplant [d3]\nWater the plant the day before...\n",
        "extract": {
            "has_valid_process": True,
            "goal": "Repot a houseplant [d3]",
            "steps": [
                "Water the plant a day ahead.",
                "Tip the pot and slide the plant out.",
                "Loosen the roots by hand.",
                "Set the plant in the new pot.",
                "Fill around it with fresh soil.",
            ],
        },
        "rewrite": {
            "rewritten_goal": "Repot a small houseplant [d3]",
            "rewritten_steps": [
                "Water the plant a day ahead.",
                "Tip the pot and slide the plant out.",
                "Loosen the roots by hand.",
                "Set the plant in the new pot.",
                "Fill around it with fresh soil.",
            ],
        },
        "resources": {"resources": ["pot", "fresh soil"]},
    },
}

MARK = re.compile(r"\[(d\d)\]")


def _marked_doc(text: str) -> str:
    found = MARK.search(text)
    assert found, text
    return found.group(1)


def mined_answer(body: dict) -> Reply:
    stage = stage_of(body)
    doc = _marked_doc(body["messages"][0]["content"])
    script = MINED[doc]
    answer = {
        "extract_procedure": script["extract"],
        "llm_filter": {"judgment": False, "reason": ""},
        "rewrite": script["rewrite"],
        "extract_resources": script["resources"],
        "final_validation": {
            q: YES for q in ("correctness", "sequential", "no_specific_entity", "goal_steps_alignment")
        },
    }[stage]
    return Reply(json.dumps(answer))


def expected_mining_requests(reference: Reference) -> dict[tuple[str, str], str]:
    expected = {}
    for doc, script in MINED.items():
        extracted, rewritten = script["extract"], script["rewrite"]
        expected[("extract_procedure", doc)] = reference.extract(script["document"])
        expected[("llm_filter", doc)] = reference.filter(extracted["goal"], extracted["steps"])
        expected[("rewrite", doc)] = reference.postprocess(extracted["goal"], extracted["steps"])
        expected[("extract_resources", doc)] = reference.resources(
            rewritten["rewritten_goal"], rewritten["rewritten_steps"]
        )
        expected[("final_validation", doc)] = reference.final_filter(
            rewritten["rewritten_goal"], rewritten["rewritten_steps"], script["resources"]["resources"]
        )
    return expected


def identical(sent: dict, expected: dict) -> int:
    return sum(1 for key, text in expected.items() if sent.get(key) == [{"role": "user", "content": text}])


@pytest.mark.django_db(transaction=True)
def test_mining_with_the_reference_prompts_sends_the_reference_requests_byte_for_byte(settings, reference_prompts):
    with ScriptedLLM() as server:
        server.default = mined_answer
        point_stages_at(settings, server)
        corpus = make_corpus([(doc, "food-dining", script["document"]) for doc, script in MINED.items()])
        run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
        # every stage found its file in PROMPTS_DIR under the reference's name
        assert {stage: Path(spec["prompt_file"]).name for stage, spec in run.stages.items()} == {
            "extract_procedure": "extract_procedures.txt",
            "llm_filter": "filter.txt",
            "rewrite": "postprocess.txt",
            "extract_resources": "extract_resources.txt",
            "final_validation": "final_filter.txt",
        }
        assert execute(run) == "done"
        sent: dict[tuple[str, str], list] = {}
        for body in server.chat_requests():
            key = (stage_of(body), _marked_doc(body["messages"][0]["content"]))
            assert key not in sent, f"{key} asked twice"
            sent[key] = body["messages"]
        extract_schema = next(b for b in server.chat_requests() if stage_of(b) == "extract_procedure")[
            "response_format"
        ]["json_schema"]["schema"]

    expected = expected_mining_requests(Reference(reference_prompts))
    assert set(sent) == set(expected)  # every document went through all five stages
    for key, text in expected.items():
        assert sent[key] == [{"role": "user", "content": text}], key
    assert identical(sent, expected) == 15
    # the schema asks for the field the prompt asks for
    assert extract_schema["required"] == ["has_valid_process", "goal", "steps"]
    # the stored procedures are clean: stripped, resources once each in their order
    first = Procedure.objects.get(source_example_id="d1")
    assert first.goal == "Fry one egg sunny side up [d1]"
    assert first.steps[0] == "Pour the oil into the pan." and first.steps[1] == "Heat the pan over medium heat."
    assert first.resources == ["oil, olive or canola", "pan", "egg", "plate"]
    assert Procedure.objects.get(source_example_id="d2").resources == []


def test_the_extraction_schema_follows_the_prompt_and_the_stage_reads_both_names():
    assert stage_schema("extract_procedure", STAND_INS["extract_procedures.txt"])["required"] == [
        "has_valid_process",
        "goal",
        "steps",
    ]
    ours = (Path(__file__).resolve().parent.parent / "mining" / "prompts" / "extract_procedure.txt").read_text()
    assert stage_schema("extract_procedure", ours)["required"] == ["has_procedure", "goal", "steps"]
    draft = Draft(document="text")
    for flag in ("has_valid_process", "has_procedure"):
        verdict = ExtractStage().judge(
            {flag: True, "goal": " Boil an egg ", "steps": [" Boil water.", "Add egg"]}, draft
        )
        assert verdict.passed and verdict.draft.goal == "Boil an egg"
        assert verdict.draft.steps == (" Boil water.", "Add egg")  # as answered: the next prompts show them so
        assert not ExtractStage().judge({flag: False, "goal": "", "steps": []}, draft).passed


def test_a_bare_prompt_name_is_found_in_prompts_dir_under_ours_or_the_reference_name(tmp_path):
    bundled, folder = tmp_path / "bundled", tmp_path / "mine"
    bundled.mkdir(), folder.mkdir()
    (folder / "judge.txt").write_text("x")
    assert prompt_locate("how2score_judge.txt", bundled_dir=bundled, prompts_dir=folder) == folder / "judge.txt"
    (folder / "how2score_judge.txt").write_text("y")  # our own name wins when both are there
    assert (
        prompt_locate("how2score_judge.txt", bundled_dir=bundled, prompts_dir=folder) == folder / "how2score_judge.txt"
    )
    # not in the folder: the bundled file; without the setting: the bundled file
    assert prompt_locate("rewrite.txt", bundled_dir=bundled, prompts_dir=folder) == bundled / "rewrite.txt"
    assert prompt_locate("judge.txt", bundled_dir=bundled, prompts_dir="") == bundled / "judge.txt"
    # a path is a path
    assert prompt_locate(str(folder / "judge.txt"), bundled_dir=bundled, prompts_dir="") == folder / "judge.txt"
    assert set(REFERENCE_PROMPT_NAMES.values()) == set(STAND_INS)


# -- bench: generation (base and inst) and judge ----------------------------------------

BENCH = [
    # commas inside resources, an empty resource, surrounding whitespace, braces in the goal
    {
        "goal": "  Fry an egg {sunny side up} ",
        "resources": ["oil, olive or canola", " pan", "", "egg "],
        "steps": [
            " Heat the oil in the pan.",
            "Crack the egg into the pan. ",
            "Fry for three minutes.",
            "Slide it onto a plate.",
        ],
    },
    # no resources, braces and quotes in the steps
    {
        "goal": "Write a settings file",
        "resources": [],
        "steps": ["Open a new file.", 'Type {"debug": true}.', "Save it as settings.json."],
    },
    # a plain one with letters beyond ASCII
    {
        "goal": "Make a quick dip",
        "resources": ["crème fraîche", "chives"],
        "steps": ["Spoon the crème fraîche into a bowl.", "Snip the chives over it.", "Stir and chill."],
    },
]


def bench_answer(body: dict) -> Reply:
    if body.get("response_format"):  # the judge
        return Reply(json.dumps({"reasoning": "Close enough.", "critical_failures": []}))
    n = int(re.findall(r"(\d+) steps to achieve", last_user_message(body))[-1])
    return Reply("\n".join(f"{i}. Do part {i} of it." for i in range(1, n + 1)))


@pytest.mark.django_db(transaction=True)
def test_generation_and_judging_with_the_reference_prompts_send_the_reference_requests(settings, reference_prompts):
    topics_ensure()
    topic = Topic.objects.order_by("position").first()
    assert topic is not None
    procedures = [
        Procedure.objects.create(topic=topic, split="bench", source_example_id=f"b{i}", **record)
        for i, record in enumerate(BENCH)
    ]
    reference = Reference(reference_prompts)
    with ScriptedLLM() as server:
        server.default = bench_answer
        roles = dict(settings.LLM_ROLES)
        for role in ("generate", "how2score_judge"):
            roles[role] = {
                "base_url": server.base_url,
                "api_key": "k",
                "model": "m",
                "temperature": None,
                "max_tokens": None,
            }
        settings.LLM_ROLES = roles
        runs = {}
        for style in ("inst", "base"):
            model = language_model_register(name=f"model-{style}", prompt_style=style)
            run = generation_run_create(name=f"gen-{style}", language_model=model, start=False)
            assert Path(run.prompt_file).name == f"inference_{style}.txt"
            assert generation_run_execute(run_id=run.pk) == "done"
            runs[style] = run
        generation_requests = list(server.chat_requests())
        judge_run = judge_run_create(name="judged", generation_run=runs["inst"], judge="j", start=False)
        assert Path(judge_run.prompt_file).name == "judge.txt"
        assert judge_run_execute(run_id=judge_run.pk) == "done"
        judge_requests = server.chat_requests()[len(generation_requests) :]

    expected_inst = {reference.generate("inst", p.goal, p.steps, p.resources) for p in procedures}
    expected_base = {reference.generate("base", p.goal, p.steps, p.resources) for p in procedures}
    inst = [b for b in generation_requests if b.get("messages") is not None]
    base = [b for b in generation_requests if b.get("prompt") is not None]
    assert {b["messages"][0]["content"] for b in inst} == expected_inst and all(len(b["messages"]) == 1 for b in inst)
    assert {b["prompt"] for b in base} == expected_base and len(base) == 3
    expected_judge = set()
    for generation in Generation.objects.filter(run=runs["inst"]).select_related("procedure"):
        procedure = generation.procedure
        expected_judge.add(
            reference.judge(
                procedure.goal, procedure.steps, [f"Do part {i} of it." for i in range(1, len(procedure.steps) + 1)]
            )
        )
    assert len(judge_requests) == 3
    assert {b["messages"][0]["content"] for b in judge_requests} == expected_judge
    assert all(len(b["messages"]) == 1 for b in judge_requests)
    assert all(b["max_tokens"] == 4096 for b in judge_requests)  # the reference judge's budget
    assert judge_run.judgments.filter(outcome="ok").count() == 3
