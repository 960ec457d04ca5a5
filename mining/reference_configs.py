"""Mining configurations in the reference CLI's shape (``h2e mine run --config``),
translated into our mining run configuration. Pure Python, no Django.

``mining_reference_translate(data, source=...)`` takes the parsed YAML and returns our
configuration's keys (``name``, ``topics``, ``candidates_per_topic``, ``stages``, …)
plus ``reference``: what the command does around the run (the ``inputs`` to import as a
corpus, the ``export`` to write under ``out_root``, and the notes). docs/reference-cli.md
lists every key and what it becomes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.reference_configs import (
    Translation,
    input_format_check,
    llm_block,
    mapping,
    path_value,
    refuse_unknown,
    short_name,
)

# The reference's stage names → ours.
STAGE_NAMES = {
    "procedures": "extract_procedure",
    "filter": "llm_filter",
    "postprocess": "rewrite",
    "resources": "extract_resources",
    "final_filter": "final_validation",
}
# prompts.<key> → stage (``extract`` and ``tools`` are the reference's older names).
PROMPT_KEYS = {
    "procedures": "extract_procedure",
    "extract": "extract_procedure",
    "filter": "llm_filter",
    "postprocess": "rewrite",
    "resources": "extract_resources",
    "tools": "extract_resources",
    "final_filter": "final_validation",
}
REFERENCE_KEYS = {"out_root", "inputs", "topics", "llm", "stage_llm_overrides", "prompts", "targets", "export"}
# Our own keys that may stand beside the reference's (they win over what the translation derives).
OWN_KEYS = {"name", "corpus", "seed", "executor", "concurrency", "workers", "budget_usd", "failure_retries"}
INPUT_KEYS = {
    "path",
    "kind",
    "format",
    "compression",
    "include_globs",
    "id_field",
    "text_field",
    "url_field",
    "topic_field",
}
TARGET_KEYS = {"candidates_per_topic", "desired_valid_per_topic", "extract_batch_size", "min_steps", "max_steps"}
EXPORT_FORMATS = {
    "jsonl": ("jsonl", ".jsonl"),
    "jsonl_zst": ("jsonl", ".jsonl.zst"),
    "parquet": ("parquet", ".parquet"),
    "arrow_ipc": ("arrow", ".arrow"),
}
# The reference's pseudo-topic of its no-topics mode: the run samples every document under it
# (one total budget), while each procedure keeps its document's own topic ("" when none).
NO_TOPICS = "all"
SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def is_reference_shape(data: dict[str, Any]) -> bool:
    """The reference's shape is recognised by its keys (ours has none of them)."""
    return bool(REFERENCE_KEYS & set(data) - {"topics"})


def parse_size(value: Any, where: str, t: Translation) -> int:
    """``"500MB"`` → 500,000,000 bytes (decimal units; ``MiB`` and friends are binary)."""
    text = str(value).strip().upper().replace(" ", "")
    digits = text.rstrip("KMGTIB")
    unit = text[len(digits) :]
    try:
        number = float(digits)
    except ValueError:
        number = -1
    if number <= 0 or unit not in SIZE_UNITS:
        raise t.error(where, f'must be a size such as "500MB" or "2GB", got {value!r}')
    return int(number * SIZE_UNITS[unit])


def _inputs(raw: Any, t: Translation, base_dir: Path) -> dict[str, Any]:
    inputs = mapping(raw, "inputs", t)
    refuse_unknown(inputs, INPUT_KEYS, "inputs", t)
    kind = str(inputs.get("kind", "documents")).strip() or "documents"
    if kind not in ("documents", "jsonl_documents"):
        raise t.error("inputs.kind", f"only documents (or jsonl_documents) can be mined, got {kind!r}")
    input_format_check(inputs, t)
    globs = inputs.get("include_globs") or []
    if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
        raise t.error("inputs.include_globs", "must be a list of glob patterns")
    fields = {}
    for key, default in (("id_field", "id"), ("text_field", "text"), ("url_field", "url"), ("topic_field", "topic")):
        value = inputs.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise t.error(f"inputs.{key}", "must be a field name")
        fields[key[:-6]] = value.strip()
    return {
        "path": str(path_value(inputs.get("path"), "inputs.path", t, base_dir)),
        "include": [g.strip() for g in globs if g.strip()],
        "fields": fields,
        "fixed_topic": "",  # documents keep their own topic, in the no-topics mode too
    }


def _stages(data: dict[str, Any], t: Translation, base_dir: Path) -> dict[str, dict[str, Any]]:
    """Each stage's spec. A ``backend: vllm`` stage runs in-process, as in the reference
    (executor ``vllm_offline``, ``engine_kwargs`` passed to ``vllm.LLM``), unless our own key
    ``executor: online`` stands beside: then it is asked at its role's endpoint (a ``vllm
    serve`` started with the engine options, which are refused here)."""
    in_process = data.get("executor") != "online"
    top = llm_block(data.get("llm"), "llm", t, base_dir, defaults={"max_new_tokens": 2048}, in_process_vllm=in_process)
    overrides = mapping(data.get("stage_llm_overrides"), "stage_llm_overrides", t)
    unknown = sorted(map(str, set(overrides) - set(STAGE_NAMES)))
    if unknown:
        raise t.error(
            "stage_llm_overrides", f"unknown stage(s) {', '.join(unknown)}; the stages are {', '.join(STAGE_NAMES)}"
        )
    llm_raw = mapping(data.get("llm"), "llm", t)
    prompts = mapping(data.get("prompts"), "prompts", t)
    refuse_unknown(prompts, set(PROMPT_KEYS), "prompts", t)
    stages: dict[str, dict[str, Any]] = {}
    for theirs, ours in STAGE_NAMES.items():
        inherited = {k: v for k, v in llm_raw.items() if k != "backend"}
        given = mapping(overrides.get(theirs), f"stage_llm_overrides.{theirs}", t)
        spec = (
            llm_block(
                given,
                f"stage_llm_overrides.{theirs}",
                t,
                base_dir,
                defaults={"max_new_tokens": 2048, **inherited},
                in_process_vllm=in_process,
            )
            if given
            else top
        )
        stage = {
            "model": spec["model"],
            "temperature": spec["temperature"],
            "max_tokens": spec["max_tokens"],
            "requests_per_minute": spec["requests_per_minute"],
            "tokens_per_minute": spec["tokens_per_minute"],
            "mode": spec["mode"],
            "params": spec["params"],
        }
        if spec["backend"] == "vllm":
            stage["role"] = ours  # the role's model settings (and, with executor: online, its `vllm serve`)
            if in_process:
                stage["executor"] = "vllm_offline"
                stage["engine"] = spec["engine"]
        for key in [k for k, stage_name in PROMPT_KEYS.items() if stage_name == ours and k in prompts]:
            stage["prompt_file"] = str(path_value(prompts[key], f"prompts.{key}", t, base_dir))
        stages[ours] = stage
    return stages


def mining_reference_translate(data: dict[str, Any], *, source: str, base_dir: Path | None = None) -> dict[str, Any]:
    """Our configuration's keys from a reference mining configuration (see the module docstring)."""
    t = Translation(source)
    base = Path.cwd() if base_dir is None else base_dir
    refuse_unknown(data, REFERENCE_KEYS | OWN_KEYS | {"stages"}, "", t)
    if "stages" in data:  # the reference's older name of stage_llm_overrides
        if "stage_llm_overrides" in data:
            raise t.error("stages", "give stage_llm_overrides or its older name stages, not both")
        data = {**{k: v for k, v in data.items() if k != "stages"}, "stage_llm_overrides": data["stages"]}
    out_root = path_value(data.get("out_root"), "out_root", t, base)
    topics = data.get("topics")
    if topics is not None and (
        not isinstance(topics, list) or not all(isinstance(x, str) and x.strip() for x in topics)
    ):
        raise t.error("topics", "must be a list of topic names (or [] / omitted for the no-topics mode)")
    use_topics = bool(topics)
    targets = mapping(data.get("targets"), "targets", t)
    refuse_unknown(
        targets,
        TARGET_KEYS,
        "targets",
        t,
        refused={
            "train_per_topic": "mining runs do not split; split the mined procedures with "
            "`split_procedures --per-topic N`",
            "test_per_topic": "mining runs do not split; split the mined procedures with "
            "`split_procedures --per-topic N`",
        },
    )
    config: dict[str, Any] = {
        "name": short_name(out_root.name),
        "topics": [x.strip() for x in topics] if topics else [NO_TOPICS],
        "candidates_per_topic": targets.get("candidates_per_topic", 100),
        "stages": _stages(data, t, base),
    }
    if targets.get("desired_valid_per_topic") is not None:
        config["desired_valid_per_topic"] = targets["desired_valid_per_topic"]
        config["extract_batch_size"] = targets.get("extract_batch_size", 50)
    elif "extract_batch_size" in targets:
        t.note("targets.extract_batch_size", "used only with desired_valid_per_topic (as in the reference)")
    for key in ("min_steps", "max_steps"):
        if key in targets:
            config[key] = targets[key]
    export = mapping(data.get("export"), "export", t)
    refuse_unknown(export, {"format", "max_file_size"}, "export", t)
    fmt = str(export.get("format", "jsonl")).strip() or "jsonl"
    if fmt not in EXPORT_FORMATS:
        raise t.error("export.format", f"must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    max_bytes = None
    if export.get("max_file_size") not in (None, ""):
        max_bytes = parse_size(export["max_file_size"], "export.max_file_size", t)
    export_fmt, suffix = EXPORT_FORMATS[fmt]
    inputs = None
    if "inputs" in data or "corpus" not in data:
        inputs = _inputs(data.get("inputs"), t, base)
    elif not use_topics:
        config["topics"] = "all"  # an imported corpus without inputs: every topic it has
    for key in OWN_KEYS:
        if key in data:
            config[key] = data[key]
    config["reference"] = {
        "out_root": str(out_root),
        "inputs": inputs,
        "no_topics": not use_topics,
        # every document of the imported corpus is sampled under the pseudo-topic NO_TOPICS
        "pooled": inputs is not None and not use_topics,
        "export": {
            "output": str(out_root / "data" / f"all_valid{suffix}"),
            "format": export_fmt,
            "max_file_size": max_bytes,
        },
        "notes": t.notes,
    }
    return config
