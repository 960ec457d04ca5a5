"""Protocol constants of the goal-step tasks, each with the paper section it comes from.

"The paper" is Zhang, Lyu and Callison-Burch (2020), "Reasoning about Goals, Steps, and
Temporal Ordering with WikiHow". Values it does not fix are marked "operational": they are
our defaults and every one of them is a parameter of the construction."""

from __future__ import annotations

# §3: the three tasks.
STEP_INFERENCE = "step_inference"
GOAL_INFERENCE = "goal_inference"
STEP_ORDERING = "step_ordering"
TASKS: tuple[str, ...] = (STEP_INFERENCE, GOAL_INFERENCE, STEP_ORDERING)

# §3.1-3.2: "a 4-choose-1 multiple choice format"; §3.3: "a 2-choose-1 multiple choice format".
N_CANDIDATES = {STEP_INFERENCE: 4, GOAL_INFERENCE: 4, STEP_ORDERING: 2}

# §3.1: "we then choose 3 steps under different wikiHow categories with the highest cosine
# similarity to it as the negative candidates". Here the categories are the 14 topics.
N_NEGATIVES = 3

# Operational: the nearest neighbours examined per positive before choosing its 3
# negatives (negatives must come from topics other than the positive's and than each
# other's, and must not repeat a text), so a few near-identical neighbours do not leave a
# positive without negatives.
NEIGHBOURS_EXAMINED = 24

# App. D, Length filter: "we filter out steps/goals that are shorter than a specific
# threshold" (the paper gives no number). Operational: words per step and per goal.
MIN_STEP_WORDS = 3
MIN_GOAL_WORDS = 2

# App. D, Lexical-Overlap filter: "We remove examples where there is a lexical overlap
# between the prompt and each candidate" (stopwords excluded, words lemmatised). An item is
# removed when some candidate shares more than this many content words with the prompt;
# 0 = any shared content word removes it.
MAX_SHARED_WORDS = 0

# App. D, Similarity filter: "an upper threshold on the similarity between any negative step
# and any step from the prompt goal" (Goal Inference: between the prompt step and every step
# of each negative goal). The paper gives no number. Operational: a cosine of the
# embedding model above 0.8 marks a near paraphrase.
SIMILARITY_CEILING = 0.8

# §3.3: "we randomly shuffle the candidates, so each appears first with 50% chance".
ORDERING_FIRST_PROBABILITY = 0.5

# Table 1: accuracy on the test sets (RoBERTa, the best model, and humans).
PAPER_ROBERTA_ACCURACY = {STEP_INFERENCE: 0.882, GOAL_INFERENCE: 0.820, STEP_ORDERING: 0.835}
PAPER_HUMAN_ACCURACY = {STEP_INFERENCE: 0.965, GOAL_INFERENCE: 0.980, STEP_ORDERING: 0.975}

# Table 2: yield of the crowd validation (items all 3 workers answered with the label).
PAPER_YIELD = {STEP_INFERENCE: 0.543, GOAL_INFERENCE: 0.408, STEP_ORDERING: 0.356}

# §3.4: "for each example we ask 3 crowd workers".
ANNOTATORS_PER_ITEM = 3

# Operational: floats per block of the nearest-neighbour search (256 MiB of float32), so
# the search over a whole pool of steps stays within memory whatever the pool size.
SEARCH_BLOCK_FLOATS = 64 * 1024 * 1024

# Operational: positives handled per batch of the construction; a --limit build stops
# after the batch that reached the limit instead of searching for every positive.
BUILD_BATCH = 2048

# A prediction's outcome when the model returned a usable completion (goalstep/answers.py):
# "ok" (it names one candidate), "ambiguous" (it names two or more) or "unparseable" (it
# names none). All three are the model's answer, never asked again; only "ok" is scored,
# the other two are counted and left out of accuracy. Any other outcome (truncated,
# refused, parse_failed) is no answer: left out of accuracy, asked again by Retry failed.
USABLE_OUTCOMES = ("ok", "ambiguous", "unparseable")
