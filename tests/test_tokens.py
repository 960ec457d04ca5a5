"""Token lengths are exact o200k_base counts, computed offline, and never approximated.

Expected ids and counts were checked independently of the package under test: "hello
world", the mixed string and the CJK/emoji string are published o200k_base ids (tiktoken's
own examples and other implementations' known-answer tests); the other counts come from
tiktoken 0.14 itself, run with no network on the o200k_base vocabulary file whose SHA-256
(446a9538…1a2d) is the one tiktoken checks."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from judging import tokens
from judging.tokens import TokenizerUnavailable, count_tokens, encode, procedure_tokens

ROOT = Path(__file__).resolve().parent.parent

DOOR_STEPS = [
    "Stretch the rubber band around one door handle so that it crosses over the latch mechanism.",
    "Twist the band once and loop it over the opposite handle, keeping it taut.",
    "Center the band so it lies flat across the latch plate.",
]


def test_hello_world_has_the_published_o200k_ids():
    assert encode("hello world") == [24912, 2375]


def test_contractions_case_digits_and_whitespace_match_published_ids():
    text = "I'm can't HELLO'S camelCaseWord  123456 \n\n  x"
    assert encode(text) == [15390, 8535, 58527, 2699, 31233, 83330, 6187, 12929, 220, 220, 7633, 19354, 1202, 220, 1215]


def test_cjk_and_emoji_match_published_ids():
    assert encode("你好，世界 🌍🚀") == [177519, 979, 28428, 130321, 235, 112927, 222]


@pytest.mark.parametrize(
    ("text", "expected_ids"),
    [
        (
            DOOR_STEPS[0],
            [102722, 290, 29993, 8177, 2846, 1001, 4121, 5318, 813, 484, 480, 95853, 1072, 290, 101574, 27004, 13],
        ),
        (DOOR_STEPS[2], [13550, 290, 8177, 813, 480, 24384, 12508, 5251, 290, 101574, 14651, 13]),
        (
            "Preheat the oven to 180°C (350°F).",
            [4319, 38002, 290, 24722, 316, 220, 7521, 26557, 350, 11727, 68854, 741],
        ),
        ("12345678", [7633, 19354, 4388]),
        ("  leading spaces", [220, 8117, 18608]),
    ],
)
def test_ids_match_tiktoken_on_step_like_text(text, expected_ids):
    assert encode(text) == expected_ids


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sorry, I can’t help with step-by-step experimental instructions for molecular biology procedures.", 17),
        (DOOR_STEPS[1], 17),
        ("Boil water.", 4),
        ("Add tea.", 3),
        ("Stir.", 3),
        ("Serve hot.", 3),
        ("Mix the flour and sugar.", 6),
        (" ", 1),
        ("", 0),
    ],
)
def test_counts_match_tiktoken(text, expected):
    assert count_tokens(text) == expected


def test_procedure_length_is_the_sum_of_its_step_counts():
    # 17 + 17 + 12 = 46 (the steps are counted one by one, never joined).
    assert procedure_tokens(DOOR_STEPS) == 46
    assert procedure_tokens([]) == 0


def test_special_token_text_is_counted_as_ordinary_text():
    # "<|endoftext|>" read as text is 7 tokens: < | end of text | >; not refused, not id 199999.
    assert encode("<|endoftext|>") == [27, 91, 419, 1440, 919, 91, 29]


def test_a_single_string_is_not_taken_for_a_list_of_steps():
    with pytest.raises(TypeError):
        procedure_tokens("Boil water.")  # a str is a Sequence[str] to mypy: only the runtime check refuses it


def test_counting_makes_no_network_connection(tmp_path):
    # A fresh interpreter where opening any socket fails: the vocabulary must come from
    # the installed package, not from a download or a cache folder.
    script = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network is off in this test')\n"
        "socket.socket = refuse\n"
        "socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from judging.tokens import procedure_tokens\n"
        f"print(procedure_tokens({DOOR_STEPS!r}))\n"
    )
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(tmp_path),
        "DATA_GYM_CACHE_DIR": str(tmp_path),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "46"


@pytest.fixture
def fresh_tokenizer(monkeypatch):
    """Forget the loaded encoding for one test, and restore it afterwards."""
    monkeypatch.setattr(tokens, "_encoding", None)
    yield


def test_a_missing_package_is_a_clear_error_not_an_estimate(fresh_tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # makes `import bpe_openai` fail
    with pytest.raises(TokenizerUnavailable, match="bpe-openai"):
        count_tokens("Boil water.")


def test_a_tokenizer_that_disagrees_with_o200k_is_refused(fresh_tokenizer, monkeypatch):
    class WrongEncoding:
        def encode_ordinary(self, text):
            return [1] * len(text.split())

    fake = types.ModuleType("bpe_openai")
    monkeypatch.setattr(fake, "get_encoding", lambda name: WrongEncoding(), raising=False)
    monkeypatch.setitem(sys.modules, "bpe_openai", fake)
    with pytest.raises(TokenizerUnavailable, match="24912"):
        count_tokens("Boil water.")
