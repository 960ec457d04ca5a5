"""The reference CLI's mining configurations as a user switching tools runs them (issue 32,
items 2, 3 and 6): a second run over the same documents (a new ``out_root``) exports every
procedure it found, although each was stored by the first run; the out_root's ``data/``
folder holds ``all_valid_flat`` beside ``all_valid``, as the reference writes it; and the
no-topics mode keeps each document's own topic (``""`` when it has none) instead of the
pseudo-topic its sampling uses.

Configurations, corpora and records are written here in the reference's shapes and file
names; the stages are answered by the scripted miner (tests/scripted_miner.py)."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command

from mining.models import MiningRun, Procedure
from mining.procedure_services import topics_ensure
from tests.scripted_miner import document_text
from tests.test_mining_runs import miner  # noqa: F401  (fixture: the scripted miner behind every stage's role)

PROMPTS = Path(__file__).resolve().parent.parent / "mining" / "prompts"

# The reference's prompts block, its keys pointing at stage prompt files by path.
PROMPTS_BLOCK = (
    "prompts:\n"
    f"  procedures: {PROMPTS / 'extract_procedure.txt'}\n"
    f"  filter: {PROMPTS / 'llm_filter.txt'}\n"
    f"  postprocess: {PROMPTS / 'rewrite.txt'}\n"
    f"  resources: {PROMPTS / 'extract_resources.txt'}\n"
    f"  final_filter: {PROMPTS / 'final_validation.txt'}\n"
)

# The shape of the reference's openai_sync example: topics, a folder of record files.
WITH_TOPICS = """\
out_root: {out_root}
inputs:
  path: {inputs}
  include_globs: ["*.jsonl"]
  format: auto
  compression: auto
  id_field: id
  text_field: text
  url_field: url
  topic_field: topic_top_choice
topics:
  - Food & Dining
  - Health
llm:
  provider: openai
  model: gpt-4.1
  temperature: 0.0
  max_new_tokens: 4096
{prompts}targets:
  candidates_per_topic: 10
  min_steps: 4
export:
  format: {fmt}
{export_extra}"""

# The shape of the reference's openai_sync_no_topics example: topics [] and the default topic field.
NO_TOPICS = """\
out_root: {out_root}
inputs:
  path: {inputs}
  id_field: id
  text_field: text
  url_field: url
topics: []
llm: {{provider: openai, model: gpt-4.1, temperature: 0.0, max_new_tokens: 2048}}
{prompts}targets:
  candidates_per_topic: 6
export:
  format: jsonl
"""


def write_config(path: Path, template: str, **values: str) -> Path:
    values.setdefault("fmt", "jsonl")
    values.setdefault("export_extra", "")
    path.write_text(textwrap.dedent(template).format(prompts=PROMPTS_BLOCK, **values))
    return path


def write_documents(folder: Path, n: int = 6) -> Path:
    """Documents in the reference's sample-data shape: id, text, url, topic_top_choice."""
    folder.mkdir(parents=True, exist_ok=True)
    topics = ["Food & Dining", "Health", "Travel & Tourism"]
    with (folder / "part-0.jsonl").open("w") as handle:
        for i in range(n):
            row = {
                "id": f"d{i}",
                "text": document_text(f"d{i}", f"Make thing {i}"),
                "url": f"https://example.org/{i}",
                "topic_top_choice": topics[i % 3],
            }
            handle.write(json.dumps(row) + "\n")
    return folder


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def mine(config: Path) -> str:
    out = io.StringIO()
    call_command("mine_run", "--config", str(config), "--wait", stdout=out)
    return out.getvalue()


def goals(records: list[dict]) -> list[tuple[str, str]]:
    return sorted((r["source_example"]["id"], r["final_procedure"]["goal"]) for r in records)


# --- item 2: a second run over the same documents ----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_second_run_over_the_same_documents_exports_every_procedure_it_found(
    miner, tmp_path, monkeypatch, researcher_client
):
    server, _ = miner
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = write_documents(tmp_path / "docs")
    mine(write_config(tmp_path / "first.yaml", WITH_TOPICS, out_root="out/first", inputs=str(docs)))
    asked = len(server.chat_requests())
    first = read_jsonl(tmp_path / "out" / "first" / "data" / "all_valid.jsonl")
    assert len(first) == 4  # d0, d1, d3, d4: the two topics' documents

    mine(write_config(tmp_path / "second.yaml", WITH_TOPICS, out_root="out/second", inputs=str(docs)))
    assert len(server.chat_requests()) == asked  # every answer came from the ledger
    assert Procedure.objects.count() == 4  # stored once per (document, goal)
    second = read_jsonl(tmp_path / "out" / "second" / "data" / "all_valid.jsonl")
    assert goals(second) == goals(first)

    run = MiningRun.objects.get(name="second")
    assert sorted(Procedure.objects.filter(mining_runs=run).values_list("source_example_id", flat=True)) == [
        "d0",
        "d1",
        "d3",
        "d4",
    ]
    # export_procedures --mining-run, in both shapes
    for shape in ("flat", "how2mine.v1"):
        output = tmp_path / f"second-{shape}.jsonl"
        call_command(
            "export_procedures",
            "--mining-run",
            "second",
            "--shape",
            shape,
            "--output",
            str(output),
            stdout=io.StringIO(),
        )
        assert len(read_jsonl(output)) == 4
    # the run's API row, the procedure list filtered by run (API and page) and the run page agree
    assert researcher_client.get(f"/api/mining/runs/{run.pk}/").json()["procedures"] == 4
    for name in ("first", "second"):
        body = researcher_client.get(f"/api/procedures/?mining_run={name}").json()
        assert body["count"] == 4, name
    assert researcher_client.get("/api/procedures/?mining_run=nobody").json()["count"] == 0
    page = researcher_client.get(f"/mining/runs/{run.pk}/").content.decode()
    assert "/procedures/?mining_run=second" in page
    listing = researcher_client.get("/procedures/?mining_run=second").content.decode()
    assert all(f"Make thing {i}" in listing for i in (0, 1, 3, 4))


@pytest.mark.django_db(transaction=True)
def test_a_procedure_a_rewalk_no_longer_yields_leaves_that_run_only(miner, tmp_path, monkeypatch):
    """Two runs found the same procedures; the second run's documents are walked again under
    a changed rewrite prompt that yields other goals: the procedures stay the first run's
    (and are kept), the second run exports only what it now finds."""
    _, answers = miner
    plain = answers.answer

    def shorter(stage, text, found, flags):
        answer = plain(stage, text, found, flags)
        if stage == "rewrite" and "Keep it short." in text:
            answer["rewritten_goal"] += " (short)"
        return answer

    monkeypatch.setattr(answers, "answer", shorter)
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = write_documents(tmp_path / "docs", n=2)
    mine(write_config(tmp_path / "first.yaml", WITH_TOPICS, out_root="out/first", inputs=str(docs)))
    second_config = write_config(tmp_path / "second.yaml", WITH_TOPICS, out_root="out/second", inputs=str(docs))
    mine(second_config)
    first, second = MiningRun.objects.get(name="first"), MiningRun.objects.get(name="second")
    shared = set(Procedure.objects.filter(mining_runs=first).values_list("pk", flat=True))
    assert shared == set(Procedure.objects.filter(mining_runs=second).values_list("pk", flat=True)) and shared

    changed = tmp_path / "rewrite.txt"
    changed.write_text((PROMPTS / "rewrite.txt").read_text() + "\nKeep it short.\n")
    second_config.write_text(second_config.read_text().replace(str(PROMPTS / "rewrite.txt"), str(changed)))
    mine(second_config)
    now_second = set(Procedure.objects.filter(mining_runs=second).values_list("pk", flat=True))
    assert now_second and not now_second & shared
    assert all(
        g.endswith("(short)") for g in Procedure.objects.filter(pk__in=now_second).values_list("goal", flat=True)
    )
    assert set(Procedure.objects.filter(mining_runs=first).values_list("pk", flat=True)) == shared
    assert Procedure.objects.filter(pk__in=shared).count() == len(shared)  # the first run's are kept
    exported = read_jsonl(tmp_path / "out" / "second" / "data" / "all_valid.jsonl")
    assert len(exported) == second.candidates.filter(status="passed").count() == len(now_second)


# --- item 3: all_valid_flat beside all_valid -----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_out_root_holds_the_flat_records_beside_all_valid(miner, tmp_path, monkeypatch):
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = write_documents(tmp_path / "docs")
    printed = mine(write_config(tmp_path / "sync.yaml", WITH_TOPICS, out_root="out/how2mine", inputs=str(docs)))
    data = tmp_path / "out" / "how2mine" / "data"
    full, flat = read_jsonl(data / "all_valid.jsonl"), read_jsonl(data / "all_valid_flat.jsonl")
    assert f"exported {data / 'all_valid_flat.jsonl'}" in printed
    assert len(flat) == len(full) == 4
    for record, row in zip(full, flat, strict=True):  # record for record, in the same order
        assert row["source_example_id"] == record["source_example"]["id"]
        assert row["topic"] == record["source_example"]["topic"]
        for key in ("goal", "steps", "resources"):
            assert row[key] == record["final_procedure"][key]
    assert {r["topic"] for r in flat} == {"Food & Dining", "Health"}


@pytest.mark.django_db(transaction=True)
def test_the_flat_records_take_the_export_format_and_its_shards(miner, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = write_documents(tmp_path / "docs")
    mine(
        write_config(
            tmp_path / "sync.yaml",
            WITH_TOPICS,
            out_root="out/sharded",
            inputs=str(docs),
            fmt="parquet",
            export_extra='  max_file_size: "3KB"\n',
        )
    )
    data = tmp_path / "out" / "sharded" / "data"
    full = sorted(p.name for p in data.glob("all_valid_0*.parquet"))
    flat = sorted(p.name for p in data.glob("all_valid_flat_0*.parquet"))
    assert len(full) > 1 and flat  # the full records need shards at 3 KB
    # the reference's names: <stem>_00000.<ext>, numbered from 0, nothing else in the folder
    assert full == [f"all_valid_{i:05d}.parquet" for i in range(len(full))]
    assert flat == [f"all_valid_flat_{i:05d}.parquet" for i in range(len(flat))]
    assert sorted(p.name for p in data.iterdir()) == sorted(full + flat)
    rows = [row for name in flat for row in pq.read_table(data / name).to_pylist()]
    assert sorted(r["source_example_id"] for r in rows) == ["d0", "d1", "d3", "d4"]
    assert all((data / name).stat().st_size <= 3000 for name in flat if len(flat) > 1)


@pytest.mark.django_db(transaction=True)
def test_with_max_file_size_one_shard_that_holds_everything_takes_the_reference_name(miner, tmp_path, monkeypatch):
    """The reference names its files ``all_valid_00000.*`` whenever ``max_file_size`` is set,
    also when everything fits in one; our own exports keep ``NAME-00000-of-00001.*``."""
    from django.core.management import call_command

    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = write_documents(tmp_path / "docs")
    mine(
        write_config(
            tmp_path / "sync.yaml",
            WITH_TOPICS,
            out_root="out/one",
            inputs=str(docs),
            fmt="jsonl",
            export_extra='  max_file_size: "500MB"\n',
        )
    )
    data = tmp_path / "out" / "one" / "data"
    assert sorted(p.name for p in data.iterdir()) == ["all_valid_00000.jsonl", "all_valid_flat_00000.jsonl"]
    full = read_jsonl(data / "all_valid_00000.jsonl")
    flat = read_jsonl(data / "all_valid_flat_00000.jsonl")
    assert len(full) == len(flat) == 4
    own = tmp_path / "own" / "mined.jsonl"
    call_command("export_procedures", "--mining-run", "one", "--output", str(own), "--shard-size", "10")
    assert [p.name for p in own.parent.iterdir()] == ["mined-00000-of-00001.jsonl"]


# --- item 6: the no-topics mode keeps each document's own topic -------------------------------


@pytest.mark.django_db(transaction=True)
def test_no_topics_mode_keeps_each_documents_own_topic(miner, tmp_path, monkeypatch):
    topics_ensure()
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    rows = []
    for i in range(7):
        row = {"id": f"d{i}", "text": document_text(f"d{i}", f"Fix part {i}"), "url": f"https://example.org/{i}"}
        if i % 2:
            row["topic"] = "Health"  # the reference's default topic field; others have none
        rows.append(row)
    (docs / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    mine(write_config(tmp_path / "no_topics.yaml", NO_TOPICS, out_root="out/no_topics_run", inputs=str(docs)))
    run = MiningRun.objects.get(name="no_topics_run")
    assert run.candidates.count() == 6  # candidates_per_topic is the total budget
    data = tmp_path / "out" / "no_topics_run" / "data"
    full = read_jsonl(data / "all_valid.jsonl")
    flat = read_jsonl(data / "all_valid_flat.jsonl")
    assert len(full) == len(flat) == 6
    expected = {f"d{i}": ("Health" if i % 2 else "") for i in range(7)}
    assert {r["source_example"]["id"]: r["source_example"]["topic"] for r in full} == {
        doc: topic for doc, topic in expected.items() if doc in {r["source_example"]["id"] for r in full}
    }
    assert {r["source_example_id"]: r["topic"] for r in flat} == {
        r["source_example"]["id"]: r["source_example"]["topic"] for r in full
    }
    assert "all" not in {r["source_example"]["topic"] for r in full}
    assert not Procedure.objects.filter(topic__name="all").exists()


# --- item 2: the data migration links the procedures stored before -------------------------------


def _migrate(target):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


@pytest.fixture
def migrator(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    yield _migrate
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # the latest schema again


@pytest.mark.sqlite
def test_the_migration_links_each_stored_procedure_to_every_run_that_produced_it(migrator):
    apps = migrator([("mining", "0009_heartbeat_at")])
    Topic, Corpus, Document = (apps.get_model("mining", m) for m in ("Topic", "Corpus", "Document"))
    MiningRun, MiningCandidate, Procedure = (
        apps.get_model("mining", m) for m in ("MiningRun", "MiningCandidate", "Procedure")
    )
    topic = Topic.objects.create(name="Migrated", slug="migrated")
    corpus = Corpus.objects.create(name="c")
    first = MiningRun.objects.create(name="first", corpus=corpus, candidates_per_topic=5)
    second = MiningRun.objects.create(name="second", corpus=corpus, candidates_per_topic=5)
    docs = [Document.objects.create(corpus=corpus, doc_id=f"d{i}", text=f"t{i}", text_hash=f"h{i}") for i in range(3)]
    made = [
        Procedure.objects.create(
            topic=topic,
            goal=f"g{i}",
            steps=["a"],
            source_example_id=f"d{i}",
            identity=f"i{i}",
            provenance={"mining_run": "first", "mining_run_id": first.pk},
        )
        for i in range(2)
    ]
    imported = Procedure.objects.create(
        topic=topic, goal="g", steps=["a"], identity="imported", provenance={"mining_run": "elsewhere"}
    )
    for doc, procedure in zip(docs, made, strict=False):  # the second run found both again
        MiningCandidate.objects.create(run=second, document=doc, topic=topic, status="passed", procedure=procedure)
    MiningCandidate.objects.create(run=second, document=docs[2], topic=topic, status="rejected")

    apps = migrator([("mining", "0010_procedure_mining_runs")])
    Procedure = apps.get_model("mining", "Procedure")
    links = {(p.goal, tuple(sorted(p.mining_runs.values_list("name", flat=True)))) for p in Procedure.objects.all()}
    assert links == {("g0", ("first", "second")), ("g1", ("first", "second")), ("g", ())}
    assert imported.pk in set(Procedure.objects.values_list("pk", flat=True))
