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
