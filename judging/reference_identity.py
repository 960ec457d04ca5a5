"""The reference CLI's identity of a bench run, restated: how it resolves a generator's
(``models[i]`` over ``generator_defaults``) and an evaluator's settings, the stable
``generator_id`` / ``judge_id`` it hashes from them, the folder names built from those ids,
and the two manifests it writes beside its record files. Pure Python, no Django.

The facts, as the reference's bench package defines them (its ``bench/config.py``,
``generate.py``, ``judge.py``), restated here in our own words:

* **settings**: ``backend`` (``deluge`` or ``vllm``), ``provider`` (stripped; a vLLM model
  without one is ``local``), ``model``, ``temperature`` (a float), ``max_new_tokens``,
  ``max_requests_per_minute``, ``max_tokens_per_minute`` (whole numbers; defaults 4096,
  1000, 100000), ``reasoning_effort`` (stripped text or null) and ``vllm_overrides`` (the
  entry's ``vllm`` block merged one level deep over ``generator_defaults.vllm``, whatever
  the backend; ``{}`` when none). Without an ``evaluator`` the judge is How2Judge under
  vLLM (``how2everything/how2judge``, greedy, 4096 new tokens, thinking switched off).
* **ids**: the first 12 hexadecimal digits of the SHA-256 of a canonical JSON text (keys
  sorted, no spaces, text beyond ASCII kept) of a versioned payload: for a generator its
  settings, its prompt style (``generation.model_type``) and the SHA-256 of its prompt
  file; for a judge its settings without the rate limits, the SHA-256 of its prompt file
  and that file's path.
* **folders**: a model's outputs go to ``out_root/<run_name>_<generator_id>/``; a judge's to
  ``judgments/<short model>_<judge_id>/`` under it (the short model: the last part of the
  model id split at ``/`` and ``_``, characters other than letters, digits, ``.`` and ``-``
  made ``-``).
* **manifests**: ``generation_manifest.json`` beside ``generations.jsonl`` and
  ``judge_manifest.json`` beside ``judgments.jsonl``, each holding the id, the prompt's
  hash and path, and the settings hashed.
* **aggregate**: ``aggregate/summary.json`` and ``aggregate/by_topic.csv`` in the folder of
  ``judgments.jsonl``, written after judging: How2Score (the share of scored judgments
  with no critical failure, on 0-1 and ×100), the counts, the failure rate and the mean
  number of failures, overall and per topic; judgments marked ``parse_failed`` are left
  out of every number and counted apart. Here the numbers come from ``bench_aggregate``'s
  computation (judging/how2score.py), only their layout from this module.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GENERATOR_ID_VERSION = "how2bench.generator_id.v1"
JUDGE_ID_VERSION = "how2bench.judge_id.v1"
GENERATION_MANIFEST = "generation_manifest.json"
JUDGE_MANIFEST = "judge_manifest.json"
DEFAULT_JUDGE_MODEL = "how2everything/how2judge"
DEFAULTS = {
    "temperature": 0.0,
    "max_new_tokens": 4096,
    "max_requests_per_minute": 1000,
    "max_tokens_per_minute": 100000,
}
# The settings a judge_id hashes (a generator_id also hashes the rate limits).
JUDGE_FIELDS = ("backend", "provider", "model", "temperature", "max_new_tokens", "reasoning_effort", "vllm_overrides")
GENERATOR_FIELDS = (
    "backend",
    "provider",
    "model",
    "temperature",
    "max_new_tokens",
    "max_requests_per_minute",
    "max_tokens_per_minute",
    "reasoning_effort",
    "vllm_overrides",
)

__all__ = [
    "evaluator_settings",
    "generation_manifest",
    "generator_id",
    "generator_settings",
    "judge_dir_name",
    "judge_id",
    "judge_manifest",
    "reference_prompt_path",
]


def _backend(value: Any) -> str:
    return str(value).strip().lower() or "deluge"


def _provider(value: Any, backend: str) -> str:
    provider = value.strip() if isinstance(value, str) else ""
    return provider or ("local" if backend == "vllm" else "")


def _merge_one_level(base: object, override: object) -> dict[str, Any] | None:
    base_table: dict[str, Any] | None = dict(base) if isinstance(base, Mapping) else None
    override_table: dict[str, Any] | None = dict(override) if isinstance(override, Mapping) else None
    if base_table is None or override_table is None:
        return override_table if base_table is None else base_table
    merged = dict(base_table)
    for key, value in override_table.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _settings(block: Mapping[str, Any], fallback: Mapping[str, Any], *, model: str, vllm: Any) -> dict[str, Any]:
    def value(key: str) -> Any:
        return block.get(key, fallback.get(key, DEFAULTS.get(key)))

    backend = _backend(value("backend") if value("backend") is not None else "deluge")
    reasoning = value("reasoning_effort")
    return {
        "backend": backend,
        "provider": _provider(value("provider"), backend),
        "model": model.strip(),
        "temperature": float(value("temperature")),
        "max_new_tokens": int(value("max_new_tokens")),
        "max_requests_per_minute": int(value("max_requests_per_minute")),
        "max_tokens_per_minute": int(value("max_tokens_per_minute")),
        "reasoning_effort": str(reasoning).strip() if reasoning is not None else None,
        "vllm_overrides": dict(vllm) if isinstance(vllm, Mapping) else {},
    }


def generator_settings(entry: Any, defaults: Mapping[str, Any], *, prompt_style: str) -> dict[str, Any]:
    """A ``models`` entry (a model id or a mapping) over ``generator_defaults``, resolved as
    the reference resolves it, with its prompt style (``model_type``)."""
    if isinstance(entry, str):
        settings = _settings({}, defaults, model=entry, vllm=defaults.get("vllm"))
        # A bare model id takes generator_defaults' reasoning_effort as it is written there.
        settings["reasoning_effort"] = defaults.get("reasoning_effort")
    else:
        vllm = _merge_one_level(defaults.get("vllm"), entry.get("vllm"))
        settings = _settings(entry, defaults, model=str(entry.get("model") or ""), vllm=vllm)
    settings["model_type"] = prompt_style
    return settings


def evaluator_settings(block: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``evaluator`` block resolved as the reference resolves it; None: its default judge."""
    if block is None:
        return {
            "backend": "vllm",
            "provider": "local",
            "model": DEFAULT_JUDGE_MODEL,
            "temperature": 0.0,
            "max_new_tokens": 4096,
            "max_requests_per_minute": 1000,
            "max_tokens_per_minute": 100000,
            "reasoning_effort": None,
            "vllm_overrides": {"chat_template_kwargs": {"enable_thinking": False}},
        }
    return _settings(block, {}, model=str(block.get("model") or ""), vllm=block.get("vllm"))


def reference_prompt_path(value: str, base_dir: Path) -> str:
    """A prompt file's path as the reference records it: an absolute path as written, a
    relative one resolved from the working directory."""
    path = Path(value)
    return str(path if path.is_absolute() else (base_dir / path).resolve())


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _short_hash(payload: dict[str, Any]) -> str:
    text = json.dumps(_canonical(payload), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _fields(settings: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: settings.get(name) if name != "vllm_overrides" else settings.get(name) or {} for name in names}


def generator_id(settings: Mapping[str, Any], *, prompt_sha256: str) -> str:
    """The reference's ``generator_id`` of a generator's settings and its prompt's hash."""
    return _short_hash(
        {
            "generator_id_version": GENERATOR_ID_VERSION,
            "generator": _fields(settings, GENERATOR_FIELDS),
            "generation": {"model_type": settings.get("model_type")},
            "generation_prompt_sha256": prompt_sha256,
        }
    )


def judge_id(settings: Mapping[str, Any], *, prompt_sha256: str, prompt_path: str) -> str:
    """The reference's ``judge_id`` of a judge's settings, its prompt's hash and path."""
    return _short_hash(
        {
            "judge_id_version": JUDGE_ID_VERSION,
            "judge": _fields(settings, JUDGE_FIELDS),
            "judge_prompt_sha256": prompt_sha256,
            "judge_prompt_path": prompt_path,
        }
    )


def judge_dir_name(model: str, identity: str) -> str:
    """``<short model>_<judge_id>``: the folder of a judge's outputs."""
    parts = [p for p in re.split(r"[/_]+", model.strip()) if p]
    short = parts[-1] if parts else "judge"
    safe = "".join(ch if (ch.isalnum() or ch in ".-") else "-" for ch in short).strip("-")
    return f"{safe or 'judge'}_{identity}"


def generation_manifest(settings: Mapping[str, Any], *, prompt_sha256: str, prompt_path: str) -> dict[str, Any]:
    """``generation_manifest.json``: the id, the prompt's hash and path, the settings hashed."""
    return {
        "generator_id": generator_id(settings, prompt_sha256=prompt_sha256),
        "generation_prompt_sha256": prompt_sha256,
        "generation_prompt_path": prompt_path,
        "generation": {"model_type": settings.get("model_type")},
        "generator": _fields(settings, GENERATOR_FIELDS),
    }


def judge_manifest(settings: Mapping[str, Any], *, prompt_sha256: str, prompt_path: str) -> dict[str, Any]:
    """``judge_manifest.json``: the id, the prompt's hash and path, the settings hashed."""
    return {
        "judge_id": judge_id(settings, prompt_sha256=prompt_sha256, prompt_path=prompt_path),
        "judge_prompt_sha256": prompt_sha256,
        "judge_prompt_path": prompt_path,
        "judge": _fields(settings, JUDGE_FIELDS),
    }


# The aggregate the reference writes beside a judgments file: <folder of judgments.jsonl>/
# aggregate/summary.json and aggregate/by_topic.csv, after every ``h2e bench run`` and
# ``h2e bench judge`` (its leaderboard reads summary.json back).
AGGREGATE_FOLDER = "aggregate"
AGGREGATE_SUMMARY = "summary.json"
AGGREGATE_BY_TOPIC = "by_topic.csv"
# summary.json's keys in the reference's order; it writes ``n_parse_failed`` only when it is
# not 0, we always do (the reference's leaderboard reads an absent one as 0). After them the
# interval of the score, which the reference does not give: keys a reader looks up by name.
SUMMARY_KEYS = (
    "how2score",
    "how2score_percent",
    "n_examples",
    "n_with_failures",
    "failure_rate",
    "avg_failures_per_example",
    "n_parse_failed",
    "ci95",
    "ci95_percent",
)
# by_topic.csv's columns in the reference's order; it adds ``n_parse_failed`` last, and only
# when some topic has a parse failure; we always do.
BY_TOPIC_COLUMNS = (
    "topic",
    "n_judged",
    "n_with_failures",
    "how2score",
    "how2score_percent",
    "failure_rate",
    "avg_failures_per_example",
    "n_parse_failed",
)


def aggregate_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """``summary.json`` from an aggregate in the reference's names (``bench_aggregate``'s
    output, ``How2ScoreTally.reference_result``): its numbers, nothing recomputed. A score
    or rate with nothing scored stays null beside its n of 0."""
    return {key: result[key] for key in SUMMARY_KEYS}


def aggregate_topic_rows(result: Mapping[str, Any], *, no_topic: str) -> list[dict[str, Any]]:
    """``by_topic.csv``'s rows from the same aggregate, sorted by topic as the reference
    sorts them; the topic ``no_topic`` (records without a topic) is written ``""``, as the
    records of the judgments file say it."""
    rows = []
    for topic, row in result["by_topic"].items():
        written = "" if topic == no_topic else topic
        rows.append({"topic": written} | {key: row[key] for key in BY_TOPIC_COLUMNS if key != "topic"})
    return sorted(rows, key=lambda row: row["topic"])


def aggregate_topic_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as the reference's CSV: a header of ``BY_TOPIC_COLUMNS``, ``\\r\\n`` line
    ends, numbers as Python writes them, an empty cell for a null score."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=BY_TOPIC_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
