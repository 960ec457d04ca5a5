"""Protocol constants of the annotation app, each with the paper section it comes from.

How2Everything = Chang, Lo, Iyyer, Soldaini (2026). Values that the paper does not fix are
marked "operational": they are our defaults, and every one of them is a per-study field."""

from __future__ import annotations

# App. C.1: "Submissions remain closed until at least 90 seconds have elapsed."
MIN_SECONDS_DEFAULT = 90

# §4.3: "We recruit three annotators via Prolific to label 200 examples" - k = 3 per item.
ANNOTATORS_PER_ITEM_DEFAULT = 3

# Operational: a reservation returns to the pool after this many minutes without a submit
# (about 15x the 1-2 minutes per instance the guidelines ask for, App. C.1 Figure 7).
LEASE_MINUTES_DEFAULT = 30

# Operational (issue 18, slot hoarding): a participant whose page has not yet reported any
# activity (a save with an event or a draft) holds a reservation this long; the first such
# save lengthens it to the study's lease. Someone who reserves and never acts frees the slot
# after 3 minutes instead of 30 (a reader clicks a step or the goal box well within that).
INITIAL_LEASE_SECONDS = 180

# §4.3: "we screened annotators with a short qualification test". The paper gives no
# threshold; operational default: at least 80 % of the gold items right (4 of 5).
QUALIFICATION_PASS_FRACTION = 0.8

# App. C.1: "Our annotation interface enforces attention checks". Operational defaults for
# the known-answer items mixed into the pool: one in ten, and one wrong answer tolerated.
ATTENTION_CHECK_RATE_DEFAULT = 0.1
ATTENTION_MAX_FAILURES_DEFAULT = 1

# App. C.1 Figure 7 banner: "Aim to spend 1-2 minutes per instance".
TARGET_SECONDS_PER_ITEM = (60, 120)

# §4.3: annotators were paid "an average hourly rate of 28 USD"; the study page compares
# the implied hourly pay of a study with this figure.
PAPER_HOURLY_RATE_USD = 28.0

# §4.3: Krippendorff's alpha of the early pilots and of the final round (binary labels).
PAPER_PILOT_ALPHA = 0.273
PAPER_FINAL_ALPHA = 0.593

# Operational: the annotation page saves the draft at least this often (and on every change).
AUTOSAVE_SECONDS = 5

# Operational: an annotator counts as "live" on the study page if seen this recently.
LIVE_WINDOW_SECONDS = 300


# Zhang et al. 2020 §3.4: "Every HIT includes 15 examples" (30 for step ordering); a
# multiple-choice study shows up to this many items per page (1 = one at a time).
MAX_ITEMS_PER_PAGE = 30
# Zhang et al. 2020 §3.4: 5 minutes for 15 examples, i.e. about 20 seconds per example; the
# default minimum seconds of a multiple-choice study (operational: each item's own clock).
MULTIPLE_CHOICE_MIN_SECONDS_DEFAULT = 10

# Prolific: where a participant is sent with their completion code.
PROLIFIC_COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc={code}"
# Seconds the completion page waits before redirecting to Prolific.
COMPLETION_REDIRECT_SECONDS = 5

# Prolific participant ids are 24 hexadecimal characters, and a study accepts only those unless
# it allows other ids (Study.allow_other_pids: demos, pilots with colleagues, tests), which
# must still be 1-64 letters, digits, "_" or "-"; everything else is refused as malformed.
PROLIFIC_PID_PATTERN = r"^[0-9a-fA-F]{24}$"
PID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
PID_MAX_LENGTH = 64
# STUDY_ID and SESSION_ID of the entry URL (Prolific's are 24 hexadecimal characters; the
# unfilled placeholder "{{%STUDY_ID%}}" of a researcher's own test passes too).
PROLIFIC_PARAM_PATTERN = r"^[A-Za-z0-9_.{}%-]{0,100}$"
PROLIFIC_PARAM_MAX_LENGTH = 100
# A study's Prolific study id, as the researcher enters it.
PROLIFIC_STUDY_ID_PATTERN = r"^[A-Za-z0-9_-]{1,100}$"

# Limits that keep one request small: a draft or submit with more than this is refused.
MAX_FAILURES_PER_ANNOTATION = 50
MAX_TEXT_LENGTH = 5000
MAX_EVENTS_PER_SAVE = 200
MAX_CLICK_LOG = 5000
# Bounds of the annotation page's requests (issue 18): what a save or submit may carry. Integers
# go into 32-bit columns (draft_seq) and JSON; anything beyond is a 400 naming the field.
MAX_REQUEST_BYTES = 1_000_000
MAX_JSON_DEPTH = 16
MAX_DRAFT_STRING_LENGTH = 4 * MAX_TEXT_LENGTH
MAX_SEQ = 2**31 - 1
MAX_ACTIVE_MS = 2**31 - 1
MAX_CLIENT_T = 2**53
MAX_EVENT_TARGET_LENGTH = 60
SUBMISSION_ID_MAX_LENGTH = 64

# Constraint faithfulness (Yuan et al. 2023, CoScript). App. D / Figure 10 asks three questions
# per item; the paper's HIT held 20 tasks ("$6/hour for 20 samples", Ethics), i.e. about three
# minutes each on Amazon Mechanical Turk. Operational default of the minimum seconds per item:
# half of How2Everything's 90 s (App. C.1), since one script is read instead of two lists.
FAITHFULNESS_MIN_SECONDS_DEFAULT = 45
# §4.4: Fleiss's kappa of three annotators on specific goals (0.86) and on scripts of
# abstract goals (0.79); shown beside a study's figures.
PAPER_FLEISS_KAPPA_GOALS = 0.86
PAPER_FLEISS_KAPPA_SCRIPTS = 0.79

# §4.3 compares judges with "the human majority labels" of three annotators per item. A
# majority needs at least this many non-excluded annotations of an item (operational: one
# annotation is a label, not a majority; a study may ask for more). Items with fewer are
# left out of judge-human agreement, leave-one-out agreement, calibration and the
# metric-agreement report, and counted as such (docs/agreement.md).
MIN_ANNOTATIONS_FOR_MAJORITY_DEFAULT = 2
MIN_ANNOTATIONS_FOR_MAJORITY_MIN = 2
MIN_ANNOTATIONS_FOR_MAJORITY_MAX = 100

# Operational: an agreement number gets a visible "small sample" note when it rests on fewer
# than this many items, or when its 95 % interval is wider than WIDE_INTERVAL (on the
# number's own scale). At 30 items a percent agreement near 80 % has a 95 % interval about
# 0.28 wide, so below 30 the interval alone spans most differences worth reporting
# (How2Everything §4.3: the five judges lie within 76.5-83.0 % on 200 items).
SMALL_SAMPLE_ITEMS = 30
WIDE_INTERVAL = 0.3

# What the consent page and "item 3 of 12" count (docs/annotation.md, "What an annotator is
# told"); the seconds an item typically takes are each kind's (StudyKind.typical_seconds_per_item).

# Operational: reading one training example and answering its check question.
TRAINING_SECONDS_PER_EXAMPLE = 60
