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

# Rows per database round trip when importing or exporting procedures.
IMPORT_BATCH_SIZE = 2000

# How2Everything App. B.3 (heuristics filter, step 1) and §3.2(2): a mined procedure keeps
# between 5 and 15 steps, inclusive; both bounds are configurable per run.
MIN_STEPS = 5
MAX_STEPS = 15

# How2Everything App. B.3 (heuristics filter, step 2): a procedure is rejected when the
# repetition rate of its 2-, 3- or 4-grams (pooled over the normalised steps) is at or
# above the threshold for that n, i.e. rate_2 >= 0.40 or rate_3 >= 0.35 or rate_4 >= 0.30.
REPETITION_THRESHOLDS: dict[int, float] = {2: 0.40, 3: 0.35, 4: 0.30}
