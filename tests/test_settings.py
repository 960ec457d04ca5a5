"""Settings come from the environment, with embedded defaults and a safe production mode."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys

import pytest

from config.env import ImproperlyConfiguredEnv, env_bool, env_int, env_list, env_positive_int, local_secret_key
from config.settings.celery import celery_settings
from config.settings.database import database_settings
from config.settings.llm import llm_settings
from tests.services import BASE_DIR


def _django_setup(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG, settings.DATABASES['default']['ENGINE'])"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
    )


def test_production_mode_refuses_to_start_without_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(DJANGO_SETTINGS_MODULE="config.django.production", VAR_DIR=str(tmp_path))
    result = _django_setup(env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_mode_starts_with_secret_key_and_debug_off(tmp_path):
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.django.production",
        VAR_DIR=str(tmp_path),
        SECRET_KEY=secrets.token_urlsafe(50),
    )
    result = _django_setup(env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("False")


def test_local_secret_key_is_generated_once_and_private(tmp_path):
    first = local_secret_key(tmp_path)
    assert len(first) >= 50
    assert local_secret_key(tmp_path) == first
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600


def test_database_defaults_to_sqlite_under_var_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    default = database_settings()["default"]
    assert default["ENGINE"] == "django.db.backends.sqlite3"
    assert default["NAME"] == str(tmp_path / "db.sqlite3")


def test_database_url_selects_postgresql(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://app:secret@db.example:5433/how2")
    default = database_settings()["default"]
    assert default["ENGINE"] == "django.db.backends.postgresql"
    assert (default["HOST"], default["PORT"], default["NAME"], default["USER"]) == ("db.example", 5433, "how2", "app")


def test_broker_defaults_to_the_file_system_and_follows_redis(tmp_path, monkeypatch):
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.delenv("CELERY_RESULT_BACKEND", raising=False)
    embedded = celery_settings()
    assert embedded["CELERY_BROKER_URL"] == "filesystem://"
    assert embedded["CELERY_BROKER_TRANSPORT_OPTIONS"]["data_folder_in"] == str(tmp_path / "celery" / "queue")
    assert embedded["CELERY_RESULT_BACKEND"].startswith("file://")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/2")
    assert celery_settings()["CELERY_RESULT_BACKEND"] == "redis://127.0.0.1:6379/2"
    monkeypatch.setenv("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
    assert celery_settings()["CELERY_RESULT_BACKEND"] == "rpc://"


def test_llm_roles_default_to_llm_settings_and_can_be_overridden(monkeypatch):
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9000/v1")
    monkeypatch.setenv("LLM_MODEL", "gpt-5")
    monkeypatch.setenv("LLM_API_KEY", "sk-default")
    monkeypatch.setenv("JUDGE_BASE_URL", "http://127.0.0.1:8001/v1")
    monkeypatch.setenv("JUDGE_MODEL", "how2everything/how2judge")
    roles = llm_settings()["LLM_ROLES"]
    monkeypatch.setenv("JUDGE_TEMPERATURE", "0")
    monkeypatch.setenv("LLM_CONTEXT_LENGTH", "8192")
    monkeypatch.setenv("JUDGE_CONTEXT_LENGTH", "32768")
    monkeypatch.setenv("JUDGE_DISABLE_THINKING", "true")
    monkeypatch.setenv("JUDGE_REQUEST_TIMEOUT_SECONDS", "900")
    roles = llm_settings()["LLM_ROLES"]
    assert roles["generate"] == {
        "base_url": "http://127.0.0.1:9000/v1",
        "api_key": "sk-default",
        "model": "gpt-5",
        "temperature": None,
        "max_tokens": None,
        "context_length": 8192,
        "timeout_seconds": None,
        "disable_thinking": False,
    }
    assert roles["how2score_judge"] == {
        "base_url": "http://127.0.0.1:8001/v1",
        "api_key": "sk-default",
        "model": "how2everything/how2judge",
        "temperature": 0.0,
        "max_tokens": None,
        "context_length": 32768,
        "timeout_seconds": 900.0,
        "disable_thinking": True,
    }


def test_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ImproperlyConfiguredEnv, match="DEBUG='maybe'"):
        env_bool("DEBUG", True)
    monkeypatch.setenv("WORKERS", "two")
    with pytest.raises(ImproperlyConfiguredEnv, match="WORKERS='two'"):
        env_int("WORKERS", 1)
    for limit in ("0", "-3"):
        monkeypatch.setenv("LOGIN_FAILURE_LIMIT", limit)
        with pytest.raises(ImproperlyConfiguredEnv, match=f"LOGIN_FAILURE_LIMIT={limit} must be at least 1"):
            env_positive_int("LOGIN_FAILURE_LIMIT", 10)
    monkeypatch.delenv("LOGIN_FAILURE_LIMIT")
    assert env_positive_int("LOGIN_FAILURE_LIMIT", 10) == 10
    monkeypatch.setenv("ALLOWED_HOSTS", "a.example, b.example,")
    assert env_list("ALLOWED_HOSTS", []) == ["a.example", "b.example"]
