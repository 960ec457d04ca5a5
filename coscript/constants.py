"""Protocol constants of constrained planning (CoScript: Yuan et al., "Distilling Script
Knowledge from Large Language Models for Constrained Language Planning", ACL 2023).
Pure Python, no Django."""

from __future__ import annotations

# §3, Table 1: the three constraint types and their definitions, in the paper's order.
MODIFIER, METHOD, INTENT = "modifier", "method", "intent"
CONSTRAINT_TYPES = (MODIFIER, METHOD, INTENT)
CONSTRAINT_DEFINITIONS = {
    MODIFIER: "A word, an adjective or a phrase that modifies or constrains an abstract goal.",
    METHOD: "A tool or specified mode that controls the process for achieving the goal.",
    INTENT: "An additional purpose or demand when completing the goal.",
}

# App. B.1, Table 13: the handpicked examples for specific-goal generation, three per
# constraint type, each with two constraints and their specific goals (Table 8: three
# examples work best). The paper's typos are mended ("a weeding", "to get a gob").
GOAL_EXAMPLES: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {
    MODIFIER: [
        (
            "Say Goodbye in Different Language",
            [("French", "Say Goodbye in French"), ("English", "Say Goodbye in English")],
        ),
        ("Draw flowers", [("Pink", "Draw pink flowers"), ("Blue", "Draw blue flowers")]),
        ("Make hairstyle", [("At home", "Make hairstyle at home"), ("At a salon", "Make hairstyle at a salon")]),
    ],
    METHOD: [
        (
            "Lower blood pressure",
            [
                ("With medication", "Lower blood pressure with medication"),
                ("With exercises", "Lower blood pressure with exercises"),
            ],
        ),
        ("Write a book", [("By hand", "Write a book by hand"), ("By typing", "Write a book by typing")]),
        ("Register to vote", [("Online", "Register to vote online"), ("Via mail", "Register to vote via mail")]),
    ],
    INTENT: [
        (
            "Make a cake",
            [
                ("For a birthday party", "Make a cake for a birthday party"),
                ("For a wedding", "Make a cake for a wedding"),
            ],
        ),
        ("Send an email", [("To get a job", "Send an email to get a job"), ("For leave", "Send an email for leave")]),
        ("Buy flowers", [("For girlfriend", "Buy flowers for girlfriend"), ("For mother", "Buy flowers for mother")]),
    ],
}

# App. C.1, Table 11: hyper-parameters for script generation (top-p 1.0, temperature 1.0,
# max tokens 512, no presence or frequency penalty, K = 2 candidates per specific goal;
# §4.3 footnote 4: "K = 2 is sufficient", App. B.3 / Figure 7).
SCRIPT_TEMPERATURE = 1.0
SCRIPT_TOP_P = 1.0
SCRIPT_MAX_TOKENS = 512
SCRIPT_PRESENCE_PENALTY = 0.0
SCRIPT_FREQUENCY_PENALTY = 0.0
DEFAULT_K = 2
MAX_K = 10

# §4.3: two similar goals with their scripts, retrieved by the abstract goal's verbs and
# nouns, are the in-context examples of script generation.
N_SCRIPT_EXAMPLES = 2

# The paper gives no sampling parameters for specific-goal generation or the sensitive
# screen; both ask for a short, deterministic completion here.
GOALS_TEMPERATURE = 0.0
GOALS_MAX_TOKENS = 256
SCREEN_TEMPERATURE = 0.0
SCREEN_MAX_TOKENS = 8

# §4.3 "Over-Generation and Filtering": a candidate is kept only if its target specific
# goal scores highest among the goals from the same abstract goal, with a reward for
# containing the constraint's keywords. The paper gives no size for the reward; the
# bonus added to the target's cosine similarity is the share of the constraint's keywords
# the script contains times KEYWORD_BONUS (our choice: 0.1, about the gap between sibling
# goals' similarities seen with all-MiniLM-L6-v2).
FILTER_EMBEDDING_KEYWORD = "embedding+keyword"
FILTER_KEYWORD = "keyword"  # Table 3, f_sim = None: keep scripts that contain the constraint words
FILTER_EMBEDDING = "embedding"
FILTER_MODES = (FILTER_EMBEDDING_KEYWORD, FILTER_KEYWORD, FILTER_EMBEDDING)
DEFAULT_FILTER_MODE = FILTER_EMBEDDING_KEYWORD
KEYWORD_BONUS = 0.1

# App. C.2, Table 12: the sensitive-domain screen (medical and legal professions).
SENSITIVE_DOMAINS = ("medical", "legal")
