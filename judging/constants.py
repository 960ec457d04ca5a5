"""Protocol constants of the judging app, each with the paper section it comes from.

"The paper" is How2Everything (Chang, Lo, Iyyer, Soldaini, 2026)."""

# Appendix D.5 ("tiktoken o200k_base") and App. E.4 ("a fixed tokenizer"): the token
# length of a procedure is the sum of the o200k_base token counts of its steps.
TOKEN_ENCODING = "o200k_base"

# §5 (Figure 4) and App. E.4 (Table 12): "The average reference length is 97.44 tokens"
# over How2Bench. Shown beside our own reference average for comparison; never used in a
# computation.
PAPER_AVG_REFERENCE_TOKENS = 97.44

# App. D.3 (Table 9, "Dup n-gram rate (1--4)"): the duplicate n-gram rate is the
# unweighted mean over n = 1, 2, 3, 4.
DUP_NGRAM_ORDERS: tuple[int, ...] = (1, 2, 3, 4)

# App. E.4, reference-calibrated length reward: full credit while |r - 1| <= tau, with
# r = generated tokens / reference tokens ("we use tau = 0.2").
LENGTH_REWARD_TOLERANCE = 0.2

# App. E.4: outside the band the reward decays as exp(-alpha * (|r - 1| - tau) / (1 - tau))
# "with alpha = 5".
LENGTH_REWARD_ALPHA = 5.0

# App. E.4: the denominator of that exponent, 1 - tau = 0.8.
LENGTH_REWARD_DECAY_SPAN = 1.0 - LENGTH_REWARD_TOLERANCE

# §4.2 and §5: How2Score is the percentage (0-100) of judged generations labelled
# no_failure. Machine outputs give it as the reference CLI does: ``how2score`` on 0-1 and
# ``how2score_percent`` = HOW2SCORE_SCALE x that (judging/how2score.py, score_forms).
HOW2SCORE_SCALE = 100.0

# Not from a paper (the papers report How2Score without coverage): a leaderboard row whose
# model has a usable verdict on fewer than this share of the slice's items (procedures) is
# "incomplete": marked, shown unranked below the complete rows, and left out of the items the
# ranking is computed over. The leaderboard page and API accept ?min_coverage= to change it
# (docs/how2bench.md, "Uncertainty, coverage and the ranking rule").
LEADERBOARD_MIN_COVERAGE = 0.95

# Decoding (How2Everything App. D.1): greedy for non-reasoning endpoints, with the stop
# sequence "\n\n" for base models; temperature 0.6 for reasoning-enabled endpoints.
GREEDY_TEMPERATURE = 0.0
REASONING_TEMPERATURE = 0.6
BASE_STOP = ("\n\n",)
# Answer budget of the How2Score judge (reasoning plus the failure list): 4096, the
# reference CLI's default for its judge (max_new_tokens).
JUDGE_MAX_TOKENS = 4096

# ---------------------------------------------------------------------------------------
# SCORE (Sun et al., "Unleashing Scientific Reasoning for Bio-Experimental Protocol
# Generation via Structured Component-based Reward Mechanism", the Thoth / SciRecipe
# paper). docs/score.md states every definition and each reading of the paper we chose.
# ---------------------------------------------------------------------------------------

# §3.2 and §3.3.2 (Format Gate): the four Sketch-and-Fill sections, in this order.
SKETCH_FILL_TAGS: tuple[str, ...] = ("think", "key", "orc", "note")

# §3.2, Eq. (1) and App. L (Figure 20): a <key> step is one JSON object with exactly these
# three keys.
KEY_STEP_FIELDS: tuple[str, ...] = ("action", "objects", "parameters")

# App. C.1, Eq. (12): the consistency gate passes when every step's token coverage in its
# <orc> sentence is at least tau ("we set tau = 0.95 in this work").
CONSISTENCY_TAU = 0.95

# §3.3.2, Eq. (3): the step-count deviation threshold M = max(1, floor(0.6 * N_gold)).
STEP_SCALE_THRESHOLD_RATIO = 0.6
STEP_SCALE_MIN_THRESHOLD = 1

# §3.3.2, Eq. (3) and §4.1 ("hyperparameters L = 30 and lambda = 1.5"): the verbosity
# penalty g starts above L = 30 words per step on average.
STEP_WORD_LIMIT = 30

# §3.3.2 (Semantic Consistency) and §4.1: the positional decay exponent lambda = 1.5 of
# m_ij = max(0, 1 - (|i - j| / D) ** lambda).
POSITION_DECAY_EXPONENT = 1.5

# §3.3.2, Eq. (4): parameters are compared only when the object IoU is at least 0.5.
PARAMETER_OBJECT_IOU_MIN = 0.5

# §3.3.2, Eq. (5): r_semantics = Order + (1/|W|) * sum m_ij * (Obj + 1/2 * Par).
PARAMETER_WEIGHT = 0.5

# Upper end of SCORE under Eq. (5)-(6): Order <= 1, Obj <= 1 and Par / 2 <= 0.5, so
# SCORE <= 2.5. App. J.1.3 (Table 26) calls its default reward range "[0, 1]", which Eq. (5)
# does not give; we keep the equations (the run page and the leaderboard show SCORE on
# 0-2.5) and divide by this bound where a [0, 1] value is needed (the reward endpoint's term).
SCORE_MAX = 1.0 + 1.0 + PARAMETER_WEIGHT

# Answer budget of the extract_components stage (one triple per step; not from a paper).
COMPONENTS_MAX_TOKENS = 2048
