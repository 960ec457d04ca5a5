"""bench_run (YAML configs) and bench_transfer (import/export, distillation) end to end."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, ManagementUtility, call_command
from django.urls import reverse

from judging.demo import PAPER_COMPARISON_RUN_NAMES as DEMO_RUNS
from judging.models import GenerationRun, JudgeRun, Judgment
from judging.selectors import judge_run_score
from llm.models import LedgerEntry, LLMJob
from tests.scripted_llm import Reply, ScriptedLLM, Status
from tests.test_judging_runs import _judge_answer, _steps_answer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(settings, demo):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM() as scripted:
        scripted.default = lambda body: _judge_answer(body) if body.get("response_format") else _steps_answer(body)
        roles = dict(settings.LLM_ROLES)
        for role in ("generate", "how2score_judge"):
            roles[role] = {
                "base_url": scripted.base_url,
                "api_key": "k",
                "model": "m",
                "temperature": None,
                "max_tokens": None,
            }
        settings.LLM_ROLES = roles
        yield scripted


def _yaml(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GENERATE = "name: qwen-bench\nmodel:\n  name: qwen3-8b\n  prompt_style: inst\nsample_per_topic: 1\nseed: 1\n"


def _judge_waiting(config: str) -> None:
    """``bench_run judge --wait`` on a sample holding the reticello procedure, which the
    scripted judge never answers in JSON: the run ends done_with_failures, and the command
    says so and fails."""
    with pytest.raises(CommandError, match="ended done_with_failures, not done"):
        call_command("bench_run", "judge", "--config", config, "--wait")


def _generate_and_judge(tmp_path, capsys):
    call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE), "--wait")
    _judge_waiting(_yaml(tmp_path, "judge.yaml", "name: j1\ngeneration_run: qwen-bench\njudge: how2judge\n"))
    return capsys.readouterr().out


def _exit_status(*args: str) -> int:
    """Run a command as ``manage.py`` runs it (``run_from_argv``: a CommandError is printed and
    exits 1); its exit status. Not through ``execute_from_command_line``, whose django.setup()
    would bind the logging handlers to this test's captured stderr, closed after the test: a
    later test's log line then kills the whole pytest process."""
    try:
        ManagementUtility(["manage.py", *args]).fetch_command(args[0]).run_from_argv(["manage.py", *args])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_generate_and_judge_from_yaml_and_read_the_status(server, tmp_path, capsys):
    out = _generate_and_judge(tmp_path, capsys)
    assert "generation run 'qwen-bench'" in out and "14 procedures" in out
    assert "finished: done\n" in out  # the generation run: every request answered
    assert "finished: done_with_failures; 1 of 14 requests failed (parse_failed 1)\n" in out  # the judge run
    call_command("bench_run", "status", "j1")
    status = json.loads(capsys.readouterr().out)
    # the scripted judge never answers in JSON for one generation: the run says so
    assert status["status"] == "done_with_failures" and status["how2score"]["n"] == 14
    assert status["outcomes"]["ok"] == 13 and status["outcomes"]["parse_failed"] == 1
    assert status["top_errors"][0]["error"].startswith("parse_failed: no JSON object")


def test_yaml_mistakes_are_named(server, tmp_path):
    with pytest.raises(CommandError, match="unknown key\\(s\\) temprature"):
        call_command(
            "bench_run", "generate", "--config", _yaml(tmp_path, "a.yaml", "name: x\nmodel: m\ntemprature: 0\n")
        )
    with pytest.raises(CommandError, match=r"b.yaml, line \d+: not valid YAML"):
        call_command("bench_run", "generate", "--config", _yaml(tmp_path, "b.yaml", "name: x\nmodel: [unclosed\n"))
    with pytest.raises(CommandError, match="no generation run named 'nope'"):
        call_command(
            "bench_run", "judge", "--config", _yaml(tmp_path, "c.yaml", "name: j\ngeneration_run: nope\njudge: x\n")
        )
    assert not GenerationRun.objects.exclude(name__in=DEMO_RUNS).exists()  # nothing beyond the demo's runs


def test_exports_feed_bench_metrics_and_bench_aggregate(server, tmp_path, capsys):
    _generate_and_judge(tmp_path, capsys)
    generations, judgments = tmp_path / "gens.jsonl", tmp_path / "judgments.jsonl"
    call_command("bench_transfer", "export-generations", "--run", "qwen-bench", "--output", str(generations))
    call_command("bench_transfer", "export-judgments", "--judge", "how2judge", "--output", str(judgments))
    capsys.readouterr()
    call_command("bench_metrics", "--generations", str(generations))
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 14 and metrics["step_count_mismatch"] == 0
    call_command("bench_aggregate", "--judgments", str(judgments))
    aggregate = json.loads(capsys.readouterr().out)
    score = judge_run_score(JudgeRun.objects.get(name="j1"))
    assert aggregate["how2score_percent"] == pytest.approx(score["how2score_percent"])
    assert aggregate["how2score"] == pytest.approx(score["how2score"])
    assert aggregate["how2score"] == pytest.approx(aggregate["how2score_percent"] / 100)


def test_imported_generations_can_be_judged_and_imported_labels_never_overwrite(server, tmp_path, capsys):
    path = tmp_path / "elsewhere.jsonl"
    path.write_text(
        json.dumps(
            {
                "source_example_id": "paper-t7-health",
                "model": "llama-x",
                "model_completion": "1. Wear stockings.\n2. Exercise.\n3. Apply lotion.\n4. Check legs.\n5. Use ointment.",
            }
        )
        + "\n"
    )
    call_command("bench_transfer", "import-generations", str(path), "--run", "llama-import")
    run = GenerationRun.objects.get(name="llama-import")
    assert run.generations.get().predicted_steps[0] == "Wear stockings."
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({"source_example_id": "paper-t7-health", "model": "llama-x", "has_failure": False}) + "\n"
    )
    call_command("bench_transfer", "import-judgments", str(labels), "--judge", "human-check")
    assert Judgment.objects.get(judge="human-check").has_failure is False
    with pytest.raises(CommandError, match="never overwritten"):
        call_command("bench_transfer", "import-judgments", str(labels), "--judge", "human-check")
    judge = _yaml(tmp_path, "j.yaml", "name: j-import\ngeneration_run: llama-import\njudge: how2judge\n")
    call_command("bench_run", "judge", "--config", judge, "--wait")
    assert Judgment.objects.get(run__name="j-import").has_failure is False


def test_import_errors_name_the_line_and_store_nothing(server, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"source_example_id": "paper-t7-health", "model": "m", "predicted_steps": ["a"]})
        + "\n"
        + json.dumps({"source_example_id": "unknown-doc", "model": "m", "predicted_steps": ["a"]})
        + "\n"
    )
    with pytest.raises(CommandError, match="(?s)line 2, field 'source_example_id'.*Nothing was stored"):
        call_command("bench_transfer", "import-generations", str(path), "--run", "bad")
    assert not GenerationRun.objects.filter(name="bad").exists()


def test_distillation_keeps_stable_teacher_labels_only(server, tmp_path, capsys):
    _generate_and_judge(tmp_path, capsys)
    # Two sampled runs of the teacher; the second disagrees on the Transportation procedure.
    default = server.default

    def flaky(body):
        if body.get("seed") == 2 and "car seat" in body["messages"][0]["content"]:
            return Reply(
                json.dumps(
                    {"reasoning": "x", "critical_failures": [{"failure": "f", "L1_steps": [1], "L2_steps": [1]}]}
                )
            )
        return default(body)

    server.default = flaky
    for seed in (1, 2):
        config = _yaml(
            tmp_path,
            f"t{seed}.yaml",
            f"name: teacher-{seed}\ngeneration_run: qwen-bench\njudge: gpt-5-s{seed}\ntemperature: 0.6\nseed: {seed}\n",
        )
        _judge_waiting(config)
    out = tmp_path / "sft.jsonl"
    capsys.readouterr()
    call_command(
        "bench_transfer", "export-distillation", "--first", "teacher-1", "--second", "teacher-2", "--output", str(out)
    )
    summary = json.loads(capsys.readouterr().out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # The sample (seed 1) holds the reticello procedure, which the scripted judge never answers.
    assert summary["dropped"] == {"the two runs disagree": 1, "first run has no usable verdict": 1}
    assert summary["kept"] == len(records) == 12
    first = records[0]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert json.loads(first["messages"][1]["content"])["critical_failures"] is not None


# -- --wait says the run's true status, and fails unless it is done ------------------------


def _one_attempt(settings) -> None:
    """A failed request stays failed within a run: one attempt, short back-offs."""
    settings.LLM_MAX_ATTEMPTS = 1
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01


def test_generate_wait_prints_done_with_failures_and_its_failures_by_kind_and_exits_non_zero(
    server, tmp_path, capsys, settings
):
    _one_attempt(settings)
    # Three of the 14 requests fail: two with a server error, one cut off at the token limit.
    server.queue(Status(500, "upstream down"), Reply("1. Do", finish_reason="length"), Status(500, "upstream down"))
    config = _yaml(tmp_path, "gen.yaml", GENERATE)
    assert _exit_status("bench_run", "generate", "--config", config, "--wait") == 1
    captured = capsys.readouterr()
    run = GenerationRun.objects.get(name="qwen-bench")
    assert run.status == "done_with_failures"
    assert "finished: done_with_failures; 3 of 14 requests failed (truncated 1, api_error 2)\n" in captured.out
    assert "finished: done\n" not in captured.out
    assert "generation run 'qwen-bench' ended done_with_failures, not done" in captured.err

    # Retry failed --wait asks the three again; the endpoint has recovered: done, exit 0.
    assert _exit_status("bench_run", "retry", "qwen-bench", "--wait") == 0
    out = capsys.readouterr().out
    assert "finished: done\n" in out and '"status": "done"' in out
    run.refresh_from_db()
    assert run.status == "done"


def test_judge_wait_prints_each_kind_of_failure_and_exits_non_zero(server, tmp_path, capsys, settings):
    call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE), "--wait")
    _one_attempt(settings)
    default = server.default
    failures = [Status(503, "overloaded"), Reply("{", finish_reason="length")]

    def judge(body):  # two judge requests fail besides reticello's, which is never JSON
        text = body["messages"][0]["content"]
        return (
            failures.pop(0) if failures and body.get("response_format") and "reticello" not in text else default(body)
        )

    server.default = judge
    config = _yaml(tmp_path, "judge.yaml", "name: j1\ngeneration_run: qwen-bench\njudge: how2judge\n")
    capsys.readouterr()
    with pytest.raises(CommandError) as refused:
        call_command("bench_run", "judge", "--config", config, "--wait")
    assert str(refused.value) == "judge run 'j1' ended done_with_failures, not done"
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("finished:"))
    assert line == "finished: done_with_failures; 3 of 14 requests failed (parse_failed 1, truncated 1, api_error 1)"
    assert JudgeRun.objects.get(name="j1").status == "done_with_failures"


def test_a_run_paused_by_the_breaker_says_why_and_the_wait_fails(server, tmp_path, capsys, settings):
    _one_attempt(settings)
    settings.LLM_BREAKER_CONSECUTIVE = 3
    server.default = lambda body: Status(503, "service unavailable")
    with pytest.raises(CommandError, match=r"generation run 'qwen-bench' ended paused, not done \(.+\)"):
        call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE), "--wait")
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("finished:"))
    run = GenerationRun.objects.get(name="qwen-bench")
    assert run.status == "paused" and run.pause_reason and not run.error
    assert line.startswith("finished: paused; ") and f"reason: {run.pause_reason}" in line and "api_error" in line


def test_bench_run_status_and_the_run_pages_say_cost_unknown_when_a_request_has_no_price(
    server, tmp_path, capsys, admin_client_
):
    _generate_and_judge(tmp_path, capsys)
    run = GenerationRun.objects.select_related("llm_job").get(name="qwen-bench")
    assert run.llm_job is not None
    # The scripted server's model has no price: every ledger entry's cost is unknown.
    assert LedgerEntry.objects.filter(run=run.llm_job.run, cost_usd__isnull=True).count() == 14
    call_command("bench_run", "status", "qwen-bench")
    status = json.loads(capsys.readouterr().out)
    assert status["cost_usd"] is None and status["requests_without_price"] == 14
    page = admin_client_.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert f'id="generation-{run.pk}-cost"><span class="cost-unknown">unknown</span>' in page
    assert "14 requests without a price" in page and "0.0000 USD" not in page
    listing = admin_client_.get(reverse("judging_runs")).content.decode()
    assert f'id="run-{run.pk}-cost"><span class="cost-unknown">unknown</span>' in listing
    assert "0.0000" not in listing

    # Once every request the run paid for has a price, its cost is a number again.
    LedgerEntry.objects.filter(run=run.llm_job.run).update(cost_usd=Decimal("0.001"))
    LLMJob.objects.filter(pk=run.llm_job.pk).update(cost_usd=Decimal("0.014"))
    call_command("bench_run", "status", "qwen-bench")
    status = json.loads(capsys.readouterr().out)
    assert status["cost_usd"] == 0.014 and status["requests_without_price"] == 0
    page = admin_client_.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert f'id="generation-{run.pk}-cost">0.0140 USD' in page


def test_a_run_that_asked_nothing_yet_says_nothing_spent_not_a_price(server, tmp_path, admin_client_):
    from judging.services import generation_run_create, language_model_register

    model = language_model_register(name="unpriced", base_url=server.base_url, model="m")
    run = generation_run_create(name="not-yet", language_model=model, sample_per_topic=1, start=False)
    page = admin_client_.get(reverse("generation_run_detail", args=[run.pk])).content.decode()
    assert "nothing spent yet" in page and "0.0000" not in page
