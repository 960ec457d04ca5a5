"""An endpoint's key variable (``api_key_env``) may name only variables on the allow-list and
never one of the server's own secrets (issue 28, F-05: ``api_key_env: SECRET_KEY`` sent the
session-signing key as a bearer token to whatever ``base_url`` said). Refused where a name is
written (endpoint records, registered models, judge runs, run configurations: a 400 naming the
field) and where a key is read, so a name stored before the rule reads nothing."""

from __future__ import annotations

import pytest

from core.app_errors import InvalidInput
from core.run_configs import RunConfigError
from llm.key_env import SETTINGS_SECRETS, api_key_env_problem, api_key_from_env

pytestmark = pytest.mark.django_db

SECRET = "the-session-signing-key-that-must-never-leave-0123456789abcdef"


@pytest.mark.parametrize("name", sorted(SETTINGS_SECRETS))
def test_no_settings_secret_is_ever_a_key_variable_whatever_the_patterns(name, monkeypatch):
    monkeypatch.setenv("LLM_API_KEY_ENV_ALLOWED", "*")
    assert "server's own secrets" in (api_key_env_problem(name) or "")


def test_the_allow_list_takes_api_key_names_and_can_be_widened(monkeypatch):
    monkeypatch.delenv("LLM_API_KEY_ENV_ALLOWED", raising=False)
    for name in ("OPENAI_API_KEY", "VLLM_API_KEY", "LLM_API_KEY", "JUDGE_API_KEY", ""):
        assert api_key_env_problem(name) is None, name
    for name in ("HOME", "PATH", "AWS_SECRET_ACCESS_KEY", "openai_api_key"):
        assert "LLM_API_KEY_ENV_ALLOWED" in (api_key_env_problem(name) or ""), name
    monkeypatch.setenv("LLM_API_KEY_ENV_ALLOWED", "*_API_KEY, TOGETHER_TOKEN")
    assert api_key_env_problem("TOGETHER_TOKEN") is None


def test_a_stored_record_naming_a_secret_reads_nothing_and_names_the_field(monkeypatch):
    from llm.endpoint_services import endpoint_role_assign
    from llm.endpoints import endpoint_get
    from llm.models import EndpointRecord

    monkeypatch.setenv("SECRET_KEY", SECRET)
    # Stored before the rule (or edited in the database): the read refuses it.
    record = EndpointRecord.objects.create(name="old", base_url="http://127.0.0.1:9/v1", model="m")
    EndpointRecord.objects.filter(pk=record.pk).update(api_key_env="SECRET_KEY")
    endpoint_role_assign(role="generate", record=EndpointRecord.objects.get(pk=record.pk))
    with pytest.raises(InvalidInput) as caught:
        endpoint_get("generate")
    assert "api_key_env" in caught.value.fields and SECRET not in str(caught.value)
    with pytest.raises(InvalidInput):
        api_key_from_env("SECRET_KEY")


def test_a_run_override_naming_a_secret_is_refused_before_any_request(monkeypatch):
    from llm.endpoints import endpoint_from_overrides

    monkeypatch.setenv("DATABASE_URL", "postgres://app:pw@db/prod")
    with pytest.raises(InvalidInput) as caught:
        endpoint_from_overrides(
            "generate", {"base_url": "http://169.254.169.254/v1", "model": "m", "api_key_env": "DATABASE_URL"}
        )
    assert list(caught.value.fields) == ["api_key_env"]


def test_the_endpoint_api_refuses_a_secret_with_a_400_naming_the_field(admin_client_):
    response = admin_client_.post(
        "/api/llm/endpoints/",
        {"name": "leak", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "SECRET_KEY"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "api_key_env" in response.json()
    from llm.models import EndpointRecord

    assert not EndpointRecord.objects.filter(name="leak").exists()


def test_services_and_run_configurations_refuse_it(tmp_path):
    from judging.run_configs import judge_config_parse
    from judging.services import language_model_register
    from mining.run_configs import mining_config_parse

    with pytest.raises(InvalidInput) as caught:
        language_model_register(name="m1", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="SECRET_KEY")
    assert list(caught.value.fields) == ["api_key_env"]
    with pytest.raises(RunConfigError, match="api_key_env"):
        judge_config_parse(
            "name: j\ngeneration_run: g\njudge: x\napi_key_env: CELERY_BROKER_URL\n", source="judge.yaml"
        )
    with pytest.raises(RunConfigError, match="stages.extract_procedure.api_key_env"):
        mining_config_parse(
            "name: m\ncandidates_per_topic: 3\nstages:\n  extract_procedure: {api_key_env: SECRET_KEY}\n",
            source="mine.yaml",
        )
