"""core/strict_json.py: the loader that refuses what would later become a server error, and
names the field."""

from __future__ import annotations

import time

import pytest

from core.strict_json import (
    INT32_MAX,
    StrictJSONError,
    check_int,
    check_number,
    check_text,
    loads,
    loads_object,
    nesting_depth,
)


@pytest.mark.parametrize(
    "body, field",
    [
        ('{"a": NaN}', "a"),
        ('{"a": [1, Infinity]}', "a[1]"),
        ('{"a": {"b": -Infinity}}', "a.b"),
        ('{"x": 1e400}', "x"),
        ('{"draft": {"comments": "a\\u0000b"}}', "draft.comments"),
        ('{"s": "\\ud800"}', "s"),
        ('{"n": ' + "9" * 40 + "}", "n"),
    ],
)
def test_hostile_values_are_refused_with_their_path(body, field):
    with pytest.raises(StrictJSONError) as info:
        loads(body)
    assert info.value.field == field


def test_a_nul_in_an_object_key_is_refused_and_the_path_is_printable():
    with pytest.raises(StrictJSONError) as info:
        loads('{"k\\u0000": 1}')
    assert info.value.field == "k\\x00" and "NUL" in info.value.message


def test_deep_nesting_is_refused_before_parsing_without_recursion():
    with pytest.raises(StrictJSONError) as info:
        loads("[" * 200_000 + "]" * 200_000, max_bytes=10**6)
    assert "nested" in info.value.message
    assert loads("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(StrictJSONError):
        loads("[[[[1]]]]", max_depth=3)


def test_brackets_inside_strings_do_not_count_as_nesting():
    assert nesting_depth('{"a": "[[[[{{{{", "b": ["\\"]]]"]}') == 2


def test_the_depth_scan_is_linear_on_unterminated_escaped_strings():
    started = time.perf_counter()
    with pytest.raises(StrictJSONError):
        loads('"' + '\\"' * 300_000, max_bytes=10**7)
    assert time.perf_counter() - started < 5  # quadratic would take minutes


def test_oversized_bodies_and_invalid_utf8_are_refused():
    with pytest.raises(StrictJSONError, match="larger than 10 bytes"):
        loads(b'{"a": "0123456789"}', max_bytes=10)
    with pytest.raises(StrictJSONError, match="UTF-8"):
        loads(b'{"a": "\xff"}')
    with pytest.raises(StrictJSONError, match="at most 5 characters"):
        loads('{"a": "abcdef"}', max_string_length=5)


def test_ordinary_json_passes_unchanged():
    assert loads('{"ok": [1, 2.5, "x", null, true], "nested": {"k": "v"}}') == {
        "ok": [1, 2.5, "x", None, True],
        "nested": {"k": "v"},
    }
    assert loads_object(b"") == {}
    with pytest.raises(StrictJSONError, match="JSON object"):
        loads_object(b"[1]")


def test_integer_and_number_bounds_name_the_field():
    assert check_int(INT32_MAX, field="seq") == INT32_MAX
    for bad in (INT32_MAX + 1, -1, True, 1.0, "3"):
        with pytest.raises(StrictJSONError) as info:
            check_int(bad, field="seq")
        assert info.value.field == "seq"
    assert check_number(2.5, field="active_ms") == 2.5
    for bad in (float("nan"), float("inf"), -1, 2**40, "1"):
        with pytest.raises(StrictJSONError):
            check_number(bad, field="active_ms")


def test_text_is_bounded_and_free_of_nul():
    assert check_text("abc", field="STUDY_ID", max_length=5) == "abc"
    assert check_text(None, field="STUDY_ID", max_length=5) == ""
    for bad in ("a\x00", "abcdefg", 3):
        with pytest.raises(StrictJSONError) as info:
            check_text(bad, field="STUDY_ID", max_length=5)
        assert info.value.field == "STUDY_ID"
