"""Limits on uploaded and imported files, checked while reading (never after the fact).

Two scopes, each a set of four limits named ``<SCOPE>_MAX_...``:

* ``RECORD``: record files of every importer (corpora, procedures, generations, judgments),
  read by ``core/record_files.py`` (the one record reader).
* ``STUDY_ITEMS``: item files of a study (``annotate/studies/item_files.py``), smaller by nature.

``MAX_LINE_BYTES`` bounds one line (JSONL) or one record (CSV) after decompression;
``MAX_RECORDS`` the records of a file; ``MAX_DECOMPRESSED_BYTES`` the bytes a file may
decompress to (a gzip bomb stops there, and so does a compressed Parquet file on its way to
a temporary file); ``MAX_JSON_DEPTH`` how deeply a JSON value may nest. Error messages name
the setting, so whoever meets one knows which variable to raise.

Also here: the size above which a web upload is imported by a Celery worker rather than in
the request (``UPLOAD_BACKGROUND_MIN_BYTES``), the largest YAML run configuration
(``RUN_CONFIG_MAX_BYTES``), and the largest request body with files (``UPLOAD_MAX_BYTES``,
core/upload_cap.py: the compressed upload itself, refused while it arrives)."""

from __future__ import annotations

from config.env import env_positive_int

MIB = 1 << 20
GIB = 1 << 30

LIMIT_KEYS = ("MAX_LINE_BYTES", "MAX_RECORDS", "MAX_DECOMPRESSED_BYTES", "MAX_JSON_DEPTH")

# The defaults, by scope. Corpora are web crawls: long pages, millions of rows.
LIMIT_DEFAULTS: dict[str, dict[str, int]] = {
    "RECORD": {
        "MAX_LINE_BYTES": 8 * MIB,
        "MAX_RECORDS": 5_000_000,
        "MAX_DECOMPRESSED_BYTES": 20 * GIB,
        "MAX_JSON_DEPTH": 64,
    },
    # A study has hundreds or thousands of items, each a goal and two short step lists.
    "STUDY_ITEMS": {
        "MAX_LINE_BYTES": 1 * MIB,
        "MAX_RECORDS": 100_000,
        "MAX_DECOMPRESSED_BYTES": 1 * GIB,
        "MAX_JSON_DEPTH": 32,
    },
}
UPLOAD_BACKGROUND_MIN_BYTES_DEFAULT = 5 * MIB
RUN_CONFIG_MAX_BYTES_DEFAULT = 256 * 1024
UPLOAD_MAX_BYTES_DEFAULT = 4 * GIB


def upload_settings() -> dict:
    settings: dict[str, int] = {}
    for scope, defaults in LIMIT_DEFAULTS.items():
        for key in LIMIT_KEYS:
            name = f"{scope}_{key}"
            settings[name] = env_positive_int(name, defaults[key])
    settings["UPLOAD_BACKGROUND_MIN_BYTES"] = env_positive_int(
        "UPLOAD_BACKGROUND_MIN_BYTES", UPLOAD_BACKGROUND_MIN_BYTES_DEFAULT
    )
    settings["RUN_CONFIG_MAX_BYTES"] = env_positive_int("RUN_CONFIG_MAX_BYTES", RUN_CONFIG_MAX_BYTES_DEFAULT)
    settings["UPLOAD_MAX_BYTES"] = env_positive_int("UPLOAD_MAX_BYTES", UPLOAD_MAX_BYTES_DEFAULT)
    return settings
