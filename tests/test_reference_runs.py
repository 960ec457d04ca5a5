"""Re-running a bench command with a run name already taken is a clear error naming the
run, never an IntegrityError; the ledger key names the endpoint's base URL, so two servers
serving one model name never share cached answers, and every place that recomputes a
key (the client, the job, the generation's provenance, the mining walker) agrees."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from judging.demo import PAPER_COMPARISON_RUN_NAMES as DEMO_RUNS
from judging.models import GenerationRun, JudgeRun
from judging.services import generation_run_create, language_model_register
from llm.client import LLMClient
from llm.endpoints import Endpoint
from llm.models import LedgerEntry
from llm.request import LLMRequest
from tests.scripted_llm import Reply, ScriptedLLM
from tests.test_bench_run_commands import server  # noqa: F401  (the scripted generate/judge server)

pytestmark = pytest.mark.django_db(transaction=True)


def _yaml(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GENERATE = "name: qwen-bench\nmodel:\n  name: qwen3-8b\n  prompt_style: inst\nsample_per_topic: 1\nseed: 1\n"


def test_generate_with_a_taken_run_name_is_a_clear_error_naming_the_run(server, tmp_path, capsys):  # noqa: F811
    call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE), "--wait")
    first = GenerationRun.objects.get(name="qwen-bench")
    n_generations = first.generations.count()
    other = _yaml(tmp_path, "gen2.yaml", GENERATE.replace("seed: 1", "seed: 2"))
    with pytest.raises(CommandError) as caught:
        call_command("bench_run", "generate", "--config", other, "--wait")
    message = str(caught.value)
    assert "'qwen-bench'" in message and "already exists" in message and f"id {first.pk}" in message
    assert "IntegrityError" not in message and "UNIQUE" not in message
    # the same configuration again is refused the same way (no second run, nothing changed)
    with pytest.raises(CommandError, match="generation run 'qwen-bench' already exists"):
        call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE))
    ours = GenerationRun.objects.exclude(name__in=DEMO_RUNS)  # the demo's runs of the paper's examples aside
    assert ours.count() == 1
    assert ours.get().generations.count() == n_generations


def test_judge_with_a_taken_run_name_is_a_clear_error_naming_the_run(server, tmp_path):  # noqa: F811
    call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE), "--wait")
    with pytest.raises(CommandError, match="judge run 'j1' ended done_with_failures"):  # reticello: never JSON
        call_command(
            "bench_run",
            "judge",
            "--config",
            _yaml(tmp_path, "j.yaml", "name: j1\ngeneration_run: qwen-bench\njudge: how2judge\n"),
            "--wait",
        )
    existing = JudgeRun.objects.get(name="j1")
    # another judge name, the same run name: the name is what is taken
    with pytest.raises(CommandError) as caught:
        call_command(
            "bench_run",
            "judge",
            "--config",
            _yaml(tmp_path, "j2.yaml", "name: j1\ngeneration_run: qwen-bench\njudge: other-judge\n"),
        )
    assert f"judge run 'j1' already exists (id {existing.pk})" in str(caught.value)
    assert JudgeRun.objects.count() == 1


def test_the_service_refuses_a_taken_name_before_writing_anything(server, tmp_path):  # noqa: F811
    model = language_model_register(name="qwen3-8b")
    run = generation_run_create(name="taken", language_model=model, sample_per_topic=1, start=False)
    with pytest.raises(ValueError, match="generation run 'taken' already exists"):
        generation_run_create(name="taken", language_model=model, sample_per_topic=1, start=False)
    assert list(GenerationRun.objects.exclude(name__in=DEMO_RUNS).values_list("pk", flat=True)) == [run.pk]


# --- the ledger key names the endpoint ------------------------------------------------


def _request() -> LLMRequest:
    return LLMRequest(
        stage="generate", messages=[{"role": "user", "content": "Write 2 steps"}], params={"temperature": 0}
    )


def test_the_key_includes_the_base_url_and_ignores_a_trailing_slash():
    a = Endpoint(role="generate", base_url="http://10.0.0.1:8000/v1", api_key="", model="m")
    b = Endpoint(role="generate", base_url="http://10.0.0.2:8000/v1", api_key="", model="m")
    slash = Endpoint(role="generate", base_url="http://10.0.0.1:8000/v1/", api_key="", model="m")
    request = _request()
    assert request.key_for(a) != request.key_for(b)
    assert request.key_for(a) == request.key_for(slash)
    assert request.key_for(a) == request.key("m", base_url="http://10.0.0.1:8000/v1")
    # a key without a base URL (a ledger written before the URL was part of the key) no
    # longer matches: such entries are simply asked again once
    assert request.key_for(a) != request.key("m")


def test_two_servers_serving_one_model_name_do_not_share_cached_answers(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM() as first, ScriptedLLM() as second:
        first.queue(Reply("1. From the first server."))
        second.queue(Reply("1. From the second server."))
        one = LLMClient(Endpoint(role="generate", base_url=first.base_url, api_key="k", model="same-name"))
        two = LLMClient(Endpoint(role="generate", base_url=second.base_url, api_key="k", model="same-name"))
        try:
            assert one.complete(_request()).text == "1. From the first server."
            answer = two.complete(_request())
            assert not answer.cached and answer.text == "1. From the second server."
            assert len(second.chat_requests()) == 1
            # each server's answer is cached under its own key
            assert one.complete(_request()).cached and two.complete(_request()).cached
            assert len(first.chat_requests()) == 1 and len(second.chat_requests()) == 1
        finally:
            one.close()
            two.close()
    assert LedgerEntry.objects.count() == 2


def test_job_keys_and_generation_provenance_use_the_same_key_as_the_client(server, tmp_path):  # noqa: F811
    call_command("bench_run", "generate", "--config", _yaml(tmp_path, "gen.yaml", GENERATE), "--wait")
    run = GenerationRun.objects.select_related("llm_job").get(name="qwen-bench")
    assert run.llm_job is not None
    endpoint = Endpoint(role="generate", base_url=server.base_url, api_key="k", model="m")
    requests = [LLMRequest.from_dict(raw) for raw in run.llm_job.requests]
    assert run.llm_job.keys == [r.key_for(endpoint) for r in requests]
    assert set(run.llm_job.keys) <= set(LedgerEntry.objects.values_list("key", flat=True))
    assert {g.provenance["ledger_key"] for g in run.generations.all()} <= set(run.llm_job.keys)
    # the key really depends on the URL this run was sent to
    elsewhere = Endpoint(role="generate", base_url="http://elsewhere.invalid/v1", api_key="k", model="m")
    assert not set(run.llm_job.keys) & {r.key_for(elsewhere) for r in requests}
