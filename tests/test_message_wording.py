"""Messages read as sentences: no doubled words or stops where two texts meet."""

from __future__ import annotations

import pytest

from core.record_files import RecordError
from core.record_reader import iter_records
from llm.run_watch import breaker_message


def test_a_control_character_in_json_is_reported_without_a_doubled_at(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"id": "a", "text": "tab\there"}\n')
    with pytest.raises(RecordError) as refused:
        list(iter_records(path))
    message = str(refused.value)
    assert "Invalid control character at column" in message and "at at" not in message


def test_the_breaker_message_ends_each_sentence_once():
    message = breaker_message(
        {
            "endpoint": "http://127.0.0.1:9/v1",
            "reason": "20 failed attempts in a row",
            "since": "10:00:00",
            "last_error": "Connection error.",
        }
    )
    assert "last error: Connection error. Resume" in message and ".." not in message
