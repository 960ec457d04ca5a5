"""Limits on uploaded and imported files, checked while reading (never after the fact).

Two scopes, each a set of five limits named ``<SCOPE>_MAX_...``:

* ``RECORD``: record files of every importer (corpora, procedures, generations, judgments),
  read by ``core/record_reader.py`` (the one record reader).
* ``STUDY_ITEMS``: item files of a study (``annotate/studies/item_files.py``), smaller by nature.

``MAX_LINE_BYTES`` bounds one line (JSONL) or one record (CSV, and a Parquet or Arrow row)
after decompression; ``MAX_RECORDS`` the records of a file (bad lines included);
``MAX_DECOMPRESSED_BYTES`` the bytes a file may decompress to, blank lines and whitespace
included (a gzip bomb stops there, and so does a compressed Parquet file on its way to a
temporary file); ``MAX_COMPRESSION_RATIO`` how many times its own size a compressed file
(or a Parquet/Arrow file's compressed columns) may decode to, beyond its first MiB, each
record counted as 512 bytes more than its own (core/record_files.py): a newline bomb or a
million empty records is refused in a fraction of a second, whatever the decompressed limit;
``MAX_JSON_DEPTH`` how deeply a JSON value may nest. Error messages name the setting, so
whoever meets one knows which variable to raise.

Also here: the decoded size and the number of records above which a web upload is imported
by a Celery worker rather than in the request (``UPLOAD_BACKGROUND_MIN_BYTES``,
``UPLOAD_BACKGROUND_MIN_RECORDS``; mining/uploads.py), the largest YAML run configuration
(``RUN_CONFIG_MAX_BYTES``), and what a request body may cost before a view has looked at
its caller (core/request_bodies.py, core/wsgi_body.py): the largest upload, to a page that
takes one, from a caller with that page's role (``UPLOAD_MAX_BYTES``, the compressed upload
itself); the largest body of an anonymous request (``ANONYMOUS_BODY_MAX_BYTES``; a signed-in
one's is Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``), each refused from its declared length
before a byte is read; and the pace a body must keep (``REQUEST_BODY_TIMEOUT_SECONDS`` of
grace, then an average of ``REQUEST_BODY_MIN_BYTES_PER_SECOND``)."""

from __future__ import annotations

from config.env import env_positive_int

MIB = 1 << 20
GIB = 1 << 30

# Temporary files of uploads, under VAR_DIR (core/request_bodies.py).
UPLOAD_TEMP_DIRNAME = "upload-tmp"

LIMIT_KEYS = ("MAX_LINE_BYTES", "MAX_RECORDS", "MAX_DECOMPRESSED_BYTES", "MAX_JSON_DEPTH", "MAX_COMPRESSION_RATIO")

# The defaults, by scope. Corpora are web crawls: long pages, millions of rows.
LIMIT_DEFAULTS: dict[str, dict[str, int]] = {
    "RECORD": {
        "MAX_LINE_BYTES": 8 * MIB,
        "MAX_RECORDS": 5_000_000,
        "MAX_DECOMPRESSED_BYTES": 20 * GIB,
        "MAX_JSON_DEPTH": 64,
        # Text compresses 3-20 times (zstd -19 --long on boilerplate at the top end); a run
        # of newlines or zeros 1,000 (gzip) to 30,000 (zstd) times. Apache POI's zip-bomb
        # guard refuses the same 100:1.
        "MAX_COMPRESSION_RATIO": 100,
    },
    # A study has hundreds or thousands of items, each a goal and two short step lists.
    "STUDY_ITEMS": {
        "MAX_LINE_BYTES": 1 * MIB,
        "MAX_RECORDS": 100_000,
        "MAX_DECOMPRESSED_BYTES": 1 * GIB,
        "MAX_JSON_DEPTH": 32,
        "MAX_COMPRESSION_RATIO": 100,
    },
}
UPLOAD_BACKGROUND_MIN_BYTES_DEFAULT = 5 * MIB
# Tiny records cost more per byte than long ones: a corpus upload imports about 2,500 a second
# (measured on SQLite), so 5,000 take about two seconds in the request.
UPLOAD_BACKGROUND_MIN_RECORDS_DEFAULT = 5_000
RUN_CONFIG_MAX_BYTES_DEFAULT = 256 * 1024
UPLOAD_MAX_BYTES_DEFAULT = 4 * GIB
# An annotator's save (at most 200 events, its failures and their step links) is a few
# kilobytes; a login form less. Both stay far below Django's in-memory limit (2.5 MiB).
ANONYMOUS_BODY_MAX_BYTES_DEFAULT = 256 * 1024
REQUEST_BODY_TIMEOUT_SECONDS_DEFAULT = 15
# 64 KiB/s (512 kbit/s) on average after the grace: a 4 GiB upload takes at most 18 hours at
# that pace, and a client that falls behind it is cut off at once, whatever length it declared.
REQUEST_BODY_MIN_BYTES_PER_SECOND_DEFAULT = 64 * 1024


def upload_settings() -> dict:
    settings: dict[str, int] = {}
    for scope, defaults in LIMIT_DEFAULTS.items():
        for key in LIMIT_KEYS:
            name = f"{scope}_{key}"
            settings[name] = env_positive_int(name, defaults[key])
    settings["UPLOAD_BACKGROUND_MIN_BYTES"] = env_positive_int(
        "UPLOAD_BACKGROUND_MIN_BYTES", UPLOAD_BACKGROUND_MIN_BYTES_DEFAULT
    )
    settings["UPLOAD_BACKGROUND_MIN_RECORDS"] = env_positive_int(
        "UPLOAD_BACKGROUND_MIN_RECORDS", UPLOAD_BACKGROUND_MIN_RECORDS_DEFAULT
    )
    settings["RUN_CONFIG_MAX_BYTES"] = env_positive_int("RUN_CONFIG_MAX_BYTES", RUN_CONFIG_MAX_BYTES_DEFAULT)
    settings["UPLOAD_MAX_BYTES"] = env_positive_int("UPLOAD_MAX_BYTES", UPLOAD_MAX_BYTES_DEFAULT)
    settings["ANONYMOUS_BODY_MAX_BYTES"] = env_positive_int(
        "ANONYMOUS_BODY_MAX_BYTES", ANONYMOUS_BODY_MAX_BYTES_DEFAULT
    )
    settings["REQUEST_BODY_TIMEOUT_SECONDS"] = env_positive_int(
        "REQUEST_BODY_TIMEOUT_SECONDS", REQUEST_BODY_TIMEOUT_SECONDS_DEFAULT
    )
    settings["REQUEST_BODY_MIN_BYTES_PER_SECOND"] = env_positive_int(
        "REQUEST_BODY_MIN_BYTES_PER_SECOND", REQUEST_BODY_MIN_BYTES_PER_SECOND_DEFAULT
    )
    return settings
