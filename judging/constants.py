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
# no_failure.
HOW2SCORE_SCALE = 100.0

# Decoding (How2Everything App. D.1): greedy for non-reasoning endpoints, with the stop
# sequence "\n\n" for base models; temperature 0.6 for reasoning-enabled endpoints.
GREEDY_TEMPERATURE = 0.0
REASONING_TEMPERATURE = 0.6
BASE_STOP = ("\n\n",)
# Answer budget of the How2Score judge (reasoning plus the failure list).
JUDGE_MAX_TOKENS = 2048
