"""Constants of the LLM layer."""

# Every call ends as exactly one of these. Only OK carries a parsed value.
OUTCOME_OK = "ok"
OUTCOME_PARSE_FAILED = "parse_failed"
OUTCOME_TRUNCATED = "truncated"  # finish_reason "length"
OUTCOME_REFUSED = "refused"
OUTCOME_API_ERROR = "api_error"
# The prompt cannot fit the model's context (with room for an answer): not sent again until
# the prompt, the model or its context changes (llm/capabilities.py).
OUTCOME_TOO_LONG = "too_long"
OUTCOMES = (
    OUTCOME_OK,
    OUTCOME_PARSE_FAILED,
    OUTCOME_TRUNCATED,
    OUTCOME_REFUSED,
    OUTCOME_TOO_LONG,
    OUTCOME_API_ERROR,
)

# How a JSON-returning stage asked for its structure (recorded on every ledger entry).
PATH_JSON_SCHEMA = "json_schema"
PATH_JSON_OBJECT = "json_object"
PATH_TEXT = "text"

# OpenAI Batch API limits per input file (platform documentation: at most 50,000
# requests and 200 MB per batch input file).
BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_BYTES = 200 * 1024 * 1024
# Batch API prices are half of the online prices (OpenAI pricing: "50% discount").
BATCH_DISCOUNT = 0.5

EXECUTOR_ONLINE = "online"
EXECUTOR_BATCH = "batch"
EXECUTOR_VLLM_OFFLINE = "vllm_offline"
EXECUTORS = (EXECUTOR_ONLINE, EXECUTOR_BATCH, EXECUTOR_VLLM_OFFLINE)
