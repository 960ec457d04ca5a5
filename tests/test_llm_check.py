"""`llm_check` against the scripted server: reachability, structured-output support, clear failures."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from tests.scripted_llm import Reply, ScriptedLLM, Status

pytestmark = pytest.mark.django_db


def _configure(settings, **roles):
    configured = {
        name: {"base_url": "", "api_key": "", "model": "", "temperature": None, "max_tokens": None}
        for name in settings.LLM_ROLES
    }
    for role, (base_url, model) in roles.items():
        configured[role] = {
            "base_url": base_url,
            "api_key": "k",
            "model": model,
            "temperature": None,
            "max_tokens": None,
        }
    settings.LLM_ROLES = configured


def test_nothing_configured_is_a_clear_failure(settings):
    _configure(settings)
    with pytest.raises(CommandError, match="No LLM endpoint is configured"):
        call_command("llm_check")


def test_reports_each_endpoint_once_with_its_roles_and_structured_output(settings, capsys):
    with ScriptedLLM() as full, ScriptedLLM(reject_json_schema=True) as basic:
        full.default = basic.default = lambda body: Reply(json.dumps({"ok": True}))
        _configure(
            settings,
            how2score_judge=(full.base_url, "how2judge"),
            llm_filter=(full.base_url, "how2judge"),
            generate=(basic.base_url, "llama"),
        )
        call_command("llm_check")
    out = capsys.readouterr().out
    assert f"OK    {full.base_url}" in out and "structured output: json_schema" in out
    assert "roles: llm_filter, how2score_judge" in out or "roles: how2score_judge, llm_filter" in out
    assert f"OK    {basic.base_url}" in out and "structured output: json_object" in out
    assert len(full.chat_requests()) == 1  # one request per endpoint, not per role


def test_unreachable_endpoint_fails_the_command(settings, capsys):
    with ScriptedLLM() as server:
        server.default = lambda body: Status(401, "invalid api key")
        _configure(settings, how2score_judge=(server.base_url, "gpt-5"), generate=("http://127.0.0.1:9/v1", "gpt-5"))
        with pytest.raises(CommandError, match="2 of 2 endpoint"):
            call_command("llm_check", "--timeout", "2")
    out = capsys.readouterr().out
    assert "HTTP 401" in out and "cannot connect" in out


def test_role_option_checks_only_that_role(settings, capsys):
    with ScriptedLLM() as server:
        server.default = lambda body: Reply(json.dumps({"ok": True}))
        _configure(settings, how2score_judge=(server.base_url, "a"), generate=(server.base_url, "b"))
        call_command("llm_check", "--role", "generate")
    assert "model=b" in capsys.readouterr().out and len(server.chat_requests()) == 1
