"""Mining run pages and commands: admins launch from the form (bad configurations explained,
nothing created), the live page shows the funnel, costs, outcomes and reasons, the
rejected-documents browser and a document's stages; researchers read but cannot act;
`mine_run` starts, re-configures and reports a run; mined procedures export (sharded)
in the How2Mine shape with their source text and import back."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from core.intervals import share_estimate
from core.record_reader import iter_records
from mining.models import MiningRun, Procedure
from mining.procedure_services import procedure_import
from mining.runner import mining_run_execute
from tests.scripted_miner import document_text
from tests.test_mining_runs import config, make_corpus, miner, point_stages_at  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def corpus():
    docs = [
        (f"d{i}", "food-dining" if i % 2 else "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(6)
    ]
    docs.append(("d6", "health", document_text("d6", "Visit the shop", flags="reject:llm_filter")))
    docs.append(("d7", "health", document_text("d7", "Fix a hinge", flags="malformed:rewrite")))
    return make_corpus(docs)


def launch(client, corpus, text):
    return client.post(reverse("mining_run_launch"), {"corpus": corpus.pk, "config": text})


def test_admin_launches_a_run_and_reads_its_live_page(miner, corpus, admin_client_, settings):
    settings.LLM_PARSE_REASKS = 0
    response = launch(admin_client_, corpus, config("web-run", failure_retries=0))
    run = MiningRun.objects.get(name="web-run")
    assert response.status_code == 302 and response["Location"] == reverse("mining_run_detail", args=[run.pk])
    assert run.created_by == "ada"
    assert mining_run_execute(run_id=run.pk) == "done"
    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert 'id="mining-funnel"' in page and 'id="funnel-table"' in page
    assert 'id="total-procedures">6<' in page and ">1</a>" in page  # one rejected, one failed
    assert "excluded" in page and "Retry failed (1)" in page
    documents = admin_client_.get(reverse("mining_run_documents", args=[run.pk])).content.decode()
    # rejected ones by default; the failure is not a rejection (ids matched as link text: a CSRF token may hold "d7")
    assert ">d6</a>" in documents and ">d7</a>" not in documents
    failed = admin_client_.get(reverse("mining_run_documents", args=[run.pk]) + "?status=failed").content.decode()
    assert ">d7</a>" in failed and "parse_failed" in failed
    candidate = run.candidates.get(document__doc_id="d6")
    detail = admin_client_.get(reverse("mining_run_document", args=[run.pk, candidate.pk])).content.decode()
    assert 'id="stage-llm_filter"' in detail and "It is focused on a named entity." in detail
    procedure = Procedure.objects.get(source_example_id="d0")
    assert "Mined by run" in admin_client_.get(reverse("procedure_detail", args=[procedure.pk])).content.decode()


def test_a_bad_configuration_is_explained_and_nothing_is_created(miner, corpus, admin_client_):
    response = launch(admin_client_, corpus, "name: x\ncandidates_per_topic: lots\n")
    assert response.status_code == 400
    assert "candidates_per_topic must be a whole number" in response.content.decode()
    assert not MiningRun.objects.exists()


def test_admin_pauses_resumes_cancels_and_retries_from_the_page(miner, corpus, admin_client_, settings):
    settings.LLM_PARSE_REASKS = 0
    launch(admin_client_, corpus, config("web-run", failure_retries=0))
    run = MiningRun.objects.get(name="web-run")
    admin_client_.post(reverse("mining_run_action", args=[run.pk, "pause"]))
    run.refresh_from_db()
    assert run.status == "paused"
    admin_client_.post(reverse("mining_run_action", args=[run.pk, "resume"]))
    run.refresh_from_db()
    assert run.status == "pending"
    assert mining_run_execute(run_id=run.pk) == "done"
    admin_client_.post(reverse("mining_run_action", args=[run.pk, "retry-failures"]))
    assert run.candidates.filter(status="pending").count() == 1
    refused = admin_client_.post(reverse("mining_run_action", args=[run.pk, "cancel"]))
    assert refused.status_code == 400 and MiningRun.objects.get(pk=run.pk).status != "cancelled"  # asks first
    admin_client_.post(reverse("mining_run_action", args=[run.pk, "cancel"]), {"confirm": "yes"})
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_researchers_read_runs_but_cannot_launch_or_act(miner, corpus, researcher_client):
    from mining.run_services import mining_run_create

    run = mining_run_create(config_text=config("web-run"), source="run.yaml", corpus_name=corpus.name, start=False)
    listing = researcher_client.get(reverse("mining_run_list"))
    assert listing.status_code == 200 and "web-run" in listing.content.decode()
    assert "mining-run-form" not in listing.content.decode()
    assert researcher_client.get(reverse("mining_run_detail", args=[run.pk])).status_code == 200
    assert launch(researcher_client, corpus, config("other")).status_code == 403
    assert researcher_client.post(reverse("mining_run_action", args=[run.pk, "cancel"])).status_code == 403
    run.refresh_from_db()
    assert run.status == "pending"


def test_mine_run_command_starts_reconfigures_and_reports(miner, corpus, tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(config("cli-run", candidates_per_topic=2, topics="[food-dining]"))
    call_command("mine_run", "--corpus", corpus.name, "--config", str(path), "--wait")
    out = capsys.readouterr().out
    assert "mining run 'cli-run'" in out and "finished: done" in out
    run = MiningRun.objects.get(name="cli-run")
    assert run.candidates.count() == 2 and run.candidates.filter(status="passed").count() == 2
    path.write_text(config("cli-run", candidates_per_topic=2, topics="[food-dining]", max_steps=5))
    call_command("mine_run", "--config", str(path), "--wait")
    out = capsys.readouterr().out
    assert "changed stages heuristics; 2 documents walked again" in out
    run.refresh_from_db()
    assert run.candidates.filter(status="rejected", stage="heuristics").count() == 2  # 6 steps > 5
    call_command("mine_run", "--status", "cli-run")
    status = json.loads(capsys.readouterr().out)
    assert status["totals"]["rejected"] == 2 and status["funnel"][1] == {
        "stage": "heuristics",
        "reached": 2,
        "passed": 0,
        "in_flight": 0,
        "not_asked": 0,
        "dropped": 2,
        "rejected": 2,
        "pass_rate": share_estimate(0, 2),
        "undecided": 0,
    }
    with pytest.raises(CommandError, match="no mining run named 'nope'"):
        call_command("mine_run", "--status", "nope")
    path.write_text("name: [broken\n")
    with pytest.raises(CommandError, match="not valid YAML"):
        call_command("mine_run", "--corpus", corpus.name, "--config", str(path))


def test_mined_procedures_export_sharded_with_their_source_text_and_import_back(miner, corpus, tmp_path):
    from mining.run_services import mining_run_create

    run = mining_run_create(config_text=config("web-run"), source="run.yaml", corpus_name=corpus.name, start=False)
    assert mining_run_execute(run_id=run.pk) == "done"
    out = tmp_path / "mined.jsonl.zst"
    call_command(
        "export_procedures",
        "--output",
        str(out),
        "--shape",
        "how2mine.v1",
        "--mining-run",
        "web-run",
        "--shard-size",
        "4",
    )
    shards = sorted(tmp_path.glob("mined-*.jsonl.zst"))
    assert [p.name for p in shards] == ["mined-00000-of-00002.jsonl.zst", "mined-00001-of-00002.jsonl.zst"]
    records = [r for shard in shards for _, r in iter_records(shard)]
    assert len(records) == 6  # d6 was rejected and d7 failed
    first = next(r for r in records if r["source_example"]["id"] == "d0")
    assert first["source_example"]["text"].startswith("Prepare item 0 [d0]")
    # our stages' answers travel beside how2mine.v1's processed_example, never under it
    assert first["processed_example"] == {}
    assert set(first["mining_stages"]) == {
        "extract_procedure",
        "heuristics",
        "llm_filter",
        "rewrite",
        "extract_resources",
        "final_validation",
    }
    assert first["mining_run"] == "web-run" and first["final_procedure"]["resources"] == ["kettle", "cup"]
    Procedure.objects.all().delete()
    for shard in shards:
        procedure_import(path=shard)
    assert Procedure.objects.count() == 6
