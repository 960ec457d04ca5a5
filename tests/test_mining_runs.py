"""How2Mine runs end to end against the scripted OpenAI-compatible server on 127.0.0.1:
every stage's pass and rejection path, failed calls kept apart from rejections and
retried, the sampling budget and desired_valid_per_topic, the USD cap, resumed and
re-configured runs asking nothing twice, and the Batch API executor."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from core.run_configs import RunConfigError
from llm.models import LedgerEntry
from mining.models import Corpus, Document, MiningCandidate, MiningRun, Procedure, StageResult, Topic
from mining.procedure_services import topics_ensure
from mining.run_services import (
    mining_run_cancel,
    mining_run_create,
    mining_run_pause,
    mining_run_resume,
    mining_run_retry_failures,
    mining_run_update_stages,
)
from mining.runner import mining_run_execute
from mining.stages import PIPELINE
from tests.scripted_miner import document_text, scripted_miner_server, stage_of

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ("food-dining", "health", "home-hobbies")


def point_stages_at(settings, server, model: str = "scripted") -> None:
    roles = dict(settings.LLM_ROLES)
    for role in ("extract_procedure", "llm_filter", "rewrite", "extract_resources", "final_validation"):
        roles[role] = {
            "base_url": server.base_url,
            "api_key": "k",
            "model": model,
            "temperature": None,
            "max_tokens": None,
        }
    settings.LLM_ROLES = roles
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01


@pytest.fixture
def miner(settings):
    server, answers = scripted_miner_server()
    with server:
        point_stages_at(settings, server)
        yield server, answers


def make_corpus(docs: list[tuple[str, str, str]], name: str = "web") -> Corpus:
    """docs: (doc id, topic slug, text)."""
    topics_ensure()  # a transactional test's flush removes the topics the migration seeded
    corpus = Corpus.objects.create(name=name)
    topics = {t.slug: t for t in Topic.objects.all()}
    Document.objects.bulk_create(
        [Document(corpus=corpus, doc_id=d, topic=topics[t], text=text, text_hash=d) for d, t, text in docs]
    )
    return corpus


def config(name: str = "run", **extra) -> str:
    lines = [f"name: {name}", "candidates_per_topic: " + str(extra.pop("candidates_per_topic", 100))]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def execute(run: MiningRun) -> str:
    outcome = mining_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return outcome


def statuses(run: MiningRun) -> dict[str, tuple[str, str]]:
    return {c.document.doc_id: (c.status, c.stage) for c in run.candidates.select_related("document")}


def sent_stages(server) -> Counter:
    return Counter(stage_of(body) for body in server.chat_requests())


def test_full_run_over_several_topics_mines_procedures_with_provenance(miner):
    server, _ = miner
    docs = [(f"d{i}", TOPICS[i % 3], document_text(f"d{i}", f"Make thing {i}")) for i in range(9)]
    docs.append(("d9", "health", document_text("d9", "Stretch the calves", flags="reject:llm_filter")))
    corpus = make_corpus(docs)
    run = mining_run_create(config_text=config(concurrency=4), source="run.yaml", corpus_name=corpus.name, start=False)
    assert execute(run) == "done" and run.status == "done"
    assert set(run.topics.values_list("slug", flat=True)) == set(TOPICS)
    result = statuses(run)
    assert result["d9"] == ("rejected", "llm_filter")
    assert all(result[f"d{i}"] == ("passed", "final_validation") for i in range(9))
    procedures = Procedure.objects.order_by("source_example_id")
    assert procedures.count() == 9
    first = procedures.get(source_example_id="d0")
    assert first.goal == "Make thing 0 [d0] (rewritten)" and first.topic.slug == "food-dining"
    assert len(first.steps) == 6 and first.steps[0] == "Rinse the board (s1)" and first.resources == ["kettle", "cup"]
    assert first.provenance["mining_run"] == "run" and first.provenance["corpus"] == "web"
    assert set(first.provenance["processed_example"]) == set(PIPELINE)
    assert first.provenance["prompt_hashes"] == run.prompt_hashes() and all(run.prompt_hashes().values())
    # five LLM calls for each of the 9 passing documents, two for the filtered one
    assert sent_stages(server) == Counter(
        {"extract_procedure": 10, "llm_filter": 10, "rewrite": 9, "extract_resources": 9, "final_validation": 9}
    )
    assert StageResult.objects.filter(run=run).count() == 9 * 6 + 3
    assert LedgerEntry.objects.filter(run=run.ledger_run).count() == 47


@pytest.mark.parametrize(
    "flags, stage, reason_start",
    [
        ("reject:extract_procedure", "extract_procedure", "no_procedure"),
        ("", "heuristics", "too_few_steps"),
        ("reject:llm_filter", "llm_filter", "excluded: It is focused on a named entity."),
        ("empty:rewrite", "rewrite", "empty_rewrite"),
        (
            "reject:final_validation",
            "final_validation",
            "failed_validation: correctness: The steps never reach the goal.",
        ),
    ],
)
def test_each_stage_rejects_with_its_reason_and_stops_the_document(miner, flags, stage, reason_start):
    server, _ = miner
    n_steps = 3 if stage == "heuristics" else 6
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle", n_steps, flags))])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    assert execute(run) == "done"
    candidate = run.candidates.get()
    assert (candidate.status, candidate.stage) == ("rejected", stage)
    assert candidate.reason.startswith(reason_start)
    result = StageResult.objects.get(candidate=candidate, stage=stage)
    assert result.status == "rejected" and result.reason == candidate.reason
    later = PIPELINE[PIPELINE.index(stage) + 1 :]
    assert not StageResult.objects.filter(candidate=candidate, stage__in=later).exists()
    assert not (set(sent_stages(server)) & set(later))
    assert Procedure.objects.count() == 0


@pytest.mark.parametrize(
    "stage", ["extract_procedure", "llm_filter", "rewrite", "extract_resources", "final_validation"]
)
@pytest.mark.parametrize("kind, outcome", [("malformed", "parse_failed"), ("truncated", "truncated")])
def test_malformed_and_truncated_answers_fail_the_document_without_counting_as_rejections(miner, stage, kind, outcome):
    server, answers = miner
    corpus = make_corpus(
        [
            ("d1", "health", document_text("d1", "Tape an ankle", 6, f"{kind}:{stage}")),
            ("d2", "health", document_text("d2", "Ice a bruise", 6)),
        ]
    )
    run = mining_run_create(
        config_text=config(failure_retries=1), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert execute(run) == "done"
    failed = run.candidates.get(document__doc_id="d1")
    assert (failed.status, failed.stage) == ("failed", stage) and failed.reason.startswith(outcome)
    assert failed.failures == 2  # the first attempt and one retry
    assert StageResult.objects.get(candidate=failed, stage=stage).status == outcome
    assert run.candidates.get(document__doc_id="d2").status == "passed"
    assert not run.candidates.filter(status="rejected").exists()
    # the retry asked again instead of reusing the failed answer from the ledger
    assert answers.sent[(stage, "d1")] >= 2


def test_a_failure_that_goes_away_on_retry_ends_as_a_procedure(miner):
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle", 6, "flaky:rewrite"))])
    run = mining_run_create(
        config_text=config(failure_retries=1), source="run.yaml", corpus_name=corpus.name, start=False
    )
    # The client re-asks twice after an unparseable answer, so "flaky" is fixed within the call.
    assert execute(run) == "done"
    assert run.candidates.get().status == "passed"


def test_failures_are_listed_and_retried_on_request(miner, settings):
    settings.LLM_PARSE_REASKS = 0
    server, answers = miner
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle", 6, "flaky:llm_filter"))])
    run = mining_run_create(
        config_text=config(failure_retries=0), source="run.yaml", corpus_name=corpus.name, start=False
    )
    assert execute(run) == "done"
    assert run.candidates.get().status == "failed"
    assert mining_run_retry_failures(run=run, start=False) == 1
    assert execute(run) == "done"
    candidate = run.candidates.get()
    assert candidate.status == "passed" and answers.sent[("llm_filter", "d1")] == 2
    assert answers.sent[("extract_procedure", "d1")] == 1  # the extraction was kept, not asked again


def test_candidates_per_topic_is_the_sampling_budget_and_the_sample_is_seeded(miner):
    docs = [(f"d{i}", TOPICS[i % 2], document_text(f"d{i}", f"Make thing {i}")) for i in range(20)]
    corpus = make_corpus(docs)
    runs = [
        mining_run_create(
            config_text=config(f"r{n}", candidates_per_topic=3, seed=seed),
            source="run.yaml",
            corpus_name=corpus.name,
            start=False,
        )
        for n, seed in enumerate((7, 7, 8))
    ]
    samples = []
    for run in runs:
        assert execute(run) == "done"
        per_topic = Counter(run.candidates.values_list("topic__slug", flat=True))
        assert per_topic == {"food-dining": 3, "health": 3}
        samples.append(set(run.candidates.values_list("document__doc_id", flat=True)))
    assert samples[0] == samples[1] and samples[0] != samples[2]


def test_desired_valid_per_topic_stops_sampling_once_the_target_is_met(miner):
    server, _ = miner
    # food: every document passes; health: only every third one passes.
    docs = [(f"d{i}", "food-dining", document_text(f"d{i}", f"Cook dish {i}")) for i in range(20)]
    docs += [
        (f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}", flags="" if i % 3 == 0 else "reject:llm_filter"))
        for i in range(20, 40)
    ]
    corpus = make_corpus(docs)
    run = mining_run_create(
        config_text=config(candidates_per_topic=12, desired_valid_per_topic=3, extract_batch_size=2),
        source="run.yaml",
        corpus_name=corpus.name,
        start=False,
    )
    assert execute(run) == "done"
    food = run.candidates.filter(topic__slug="food-dining")
    health = run.candidates.filter(topic__slug="health")
    assert food.count() == 4 and food.filter(status="passed").count() == 4  # two batches of 2 reach 3
    assert health.filter(status="passed").count() >= 3 or health.count() == 12
    assert health.count() <= 12 and health.count() % 2 == 0
    assert len(set(health.values_list("sample_round", flat=True))) == health.count() // 2


def test_budget_cap_pauses_the_run_and_resume_finishes_without_asking_twice(settings):
    server, answers = scripted_miner_server()
    with server:
        point_stages_at(settings, server, model="gpt-4.1")  # priced: 400 in + 60 out tokens = 0.00128 USD a call
        corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(10)])
        run = mining_run_create(
            config_text=config(budget_usd=0.01, concurrency=1), source="run.yaml", corpus_name=corpus.name, start=False
        )
        assert execute(run).startswith("paused")
        assert run.status == "paused" and "budget" in run.pause_reason
        spent = LedgerEntry.objects.filter(run=run.ledger_run)
        assert 8 <= spent.count() <= 9  # stops at the first call after 0.01 USD is spent
        assert run.candidates.filter(status="pending").exists()
        mining_run_resume(run=run, budget_usd=Decimal("1"), start=False)
        assert execute(run) == "done"
        assert run.candidates.filter(status="passed").count() == 10
        assert max(answers.sent.values()) == 1  # no request sent twice


def test_pause_and_cancel_stop_a_run(miner):
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle"))])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    mining_run_pause(run=run)
    assert execute(run) == "not active (paused)"
    mining_run_resume(run=run, start=False)
    mining_run_cancel(run=run)
    assert execute(run) == "not active (cancelled)"
    with pytest.raises(ValueError, match="cannot be resumed"):
        mining_run_resume(run=run)
    assert mining_run_execute(run_id=987654) == "gone"


def test_a_prompt_change_reruns_only_the_changed_stage_and_what_its_answer_changes(miner, tmp_path):
    server, answers = miner
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(4)])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    assert execute(run) == "done"
    before = sent_stages(server)
    procedures = set(Procedure.objects.values_list("pk", flat=True))
    from mining.run_configs import PROMPTS_DIR

    changed = tmp_path / "llm_filter_v2.txt"
    changed.write_text((PROMPTS_DIR / "llm_filter.txt").read_text() + "\nBe strict.\n")
    report = mining_run_update_stages(
        run=run,
        config_text=config() + f"stages:\n  llm_filter: {{prompt_file: {changed}}}\n",
        source="run-v2.yaml",
        start=False,
    )
    assert report == {"changed_stages": ["llm_filter"], "documents_rewalked": 4}
    assert execute(run) == "done"
    after = sent_stages(server) - before
    assert after == Counter({"llm_filter": 4})  # the filter's answers did not change what follows
    assert set(Procedure.objects.values_list("pk", flat=True)) == procedures
    assert run.stages["llm_filter"]["prompt_hash"] != run.config.get("llm_filter_hash")
    assert set(StageResult.objects.filter(run=run, stage="llm_filter").values_list("prompt_hash", flat=True)) == {
        run.stages["llm_filter"]["prompt_hash"]
    }


def test_a_model_change_reruns_a_stage_and_the_stages_after_it(miner, settings):
    server, _ = miner
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(3)])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    assert execute(run) == "done"
    before = sent_stages(server)
    report = mining_run_update_stages(
        run=run, config_text=config() + "stages:\n  rewrite: {model: other-model}\n", source="run-v2.yaml", start=False
    )
    assert report["changed_stages"] == ["rewrite"]
    assert execute(run) == "done"
    # the new rewrite gives the same answer here, so only the rewrite itself is asked again
    assert sent_stages(server) - before == Counter({"rewrite": 3})
    assert set(StageResult.objects.filter(run=run, stage="rewrite").values_list("model", flat=True)) == {"other-model"}


def test_changing_what_decides_the_sample_is_refused(miner):
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle"))])
    run = mining_run_create(config_text=config(seed=1), source="run.yaml", corpus_name=corpus.name, start=False)
    with pytest.raises(RunConfigError, match="seed differs"):
        mining_run_update_stages(run=run, config_text=config(seed=2), source="run-v2.yaml", start=False)


def test_rerunning_a_finished_run_sends_nothing(miner):
    server, _ = miner
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(3)])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    assert execute(run) == "done"
    n = len(server.chat_requests())
    # a second run over the same documents with the same prompts is answered by the ledger
    second = mining_run_create(config_text=config("again"), source="run.yaml", corpus_name=corpus.name, start=False)
    assert execute(second) == "done"
    assert len(server.chat_requests()) == n
    assert second.candidates.filter(status="passed").count() == 3
    assert Procedure.objects.count() == 3  # the same procedures, not copies
    assert not StageResult.objects.filter(run=second, cost_usd__gt=0).exists()


def test_batch_api_run_mines_the_same_procedures_as_an_online_run(settings):
    settings.LLM_BATCH_POLL_SECONDS = 0
    server, answers = scripted_miner_server(batch_polls_until_done=1)
    with server:
        point_stages_at(settings, server)
        docs = [(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(4)]
        docs.append(("d4", "health", document_text("d4", "Lift", flags="reject:final_validation")))
        corpus = make_corpus(docs)
        run = mining_run_create(
            config_text=config(executor="batch"), source="run.yaml", corpus_name=corpus.name, start=False
        )
        outcome = execute(run)
        for _ in range(20):
            if outcome == "done":
                break
            outcome = execute(run)
        assert outcome == "done" and run.status == "done"
        assert run.candidates.filter(status="passed").count() == 4
        assert run.candidates.get(document__doc_id="d4").stage == "final_validation"
        assert len(server.batches) == 5  # one wave per LLM stage
        assert server.chat_requests() == []  # nothing went through the online endpoint
        assert (
            LedgerEntry.objects.filter(run=run.ledger_run, executor="batch").count() == 25
        )  # 5 documents x 5 LLM stages


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\n", "missing key(s) candidates_per_topic"),
        ("name: x\ncandidates_per_topic: 5\ncolour: red\n", "unknown key(s) colour"),
        ("name: x\ncandidates_per_topic: 0\n", "candidates_per_topic must be at least 1"),
        ("name: x\ncandidates_per_topic: 5\ndesired_valid_per_topic: 2\n", "needs extract_batch_size"),
        ("name: x\ncandidates_per_topic: 5\ntopics: [Nowhere]\n", "unknown topic 'Nowhere'"),
        (
            "name: x\ncandidates_per_topic: 5\nstages: {rewrite: {prompt_file: /nope.txt}}\n",
            "stages.rewrite: /nope.txt: cannot read",
        ),
        ("name: x\ncandidates_per_topic: 5\nstages: {paint: {}}\n", "unknown stage(s) paint"),
        ("name: x\ncandidates_per_topic: 5\nmin_steps: 9\nmax_steps: 4\n", "min_steps (9) is above max_steps (4)"),
        ("name: [x\n", "run.yaml, line 2: not valid YAML"),
    ],
)
def test_bad_configurations_are_refused_with_what_and_where(miner, text, message):
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle"))])
    with pytest.raises(RunConfigError) as caught:
        mining_run_create(config_text=text, source="run.yaml", corpus_name=corpus.name, start=False)
    assert message in str(caught.value)
    assert not MiningRun.objects.exists()


def test_a_run_without_a_configured_endpoint_is_refused(db):
    corpus = make_corpus([("d1", "health", document_text("d1", "Tape an ankle"))])
    with pytest.raises(RunConfigError, match="stages.extract_procedure: no LLM endpoint"):
        mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    assert not MiningCandidate.objects.exists()


def test_a_cancelled_runs_unfinished_documents_are_not_asked_not_in_flight(miner, researcher_client):
    """Issue 28, part 7: a cancelled mining run showed its 4 documents 'in flight' at all six
    stages and 'Pending 4' beside '0 ok of 0'; like every other cancelled run, what it never
    asked is 'not asked'."""
    from mining.run_selectors import mining_run_progress

    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(4)])
    run = mining_run_create(config_text=config(), source="run.yaml", corpus_name=corpus.name, start=False)
    from mining.run_claims import candidates_sample

    assert candidates_sample(run) == 4  # the run has drawn its documents, then it is cancelled
    mining_run_cancel(run=run)
    run.refresh_from_db()
    progress = mining_run_progress(run)
    totals = progress["totals"]
    assert totals["sampled"] == 4 and totals["pending"] == 0 and totals["not_asked"] == 4
    assert totals["yield"]["left_out"] == {"in_flight": 0, "not_asked": 4, "failed": 0}
    cells = progress["funnel"] + [c for topic in progress["funnel_by_topic"] for c in topic["stages"]]
    assert all(cell["in_flight"] == 0 for cell in cells), cells
    assert [cell["not_asked"] for cell in progress["funnel"]] == [4] * len(PIPELINE)
    html = researcher_client.get(f"/mining/runs/{run.pk}/").content.decode()
    assert "+4 in flight" not in html and "+4 not asked" in html and "4 not asked (cancelled)" in html
    assert "left out: 4 not asked, 0 failed" in html
