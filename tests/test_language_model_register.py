"""Models for generation runs registered from the Runs page (and the API), with an endpoint
record or a role, then run; the demo's leaderboard models come registered."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from judging import demo as judging_demo
from judging.models import GenerationRun, LanguageModel
from judging.services import generation_run_execute
from llm.endpoint_services import endpoint_record_create
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-record-key-0123456789-abcd"


def _steps(body):
    import re

    n = int(re.findall(r"(?:exactly |Exactly |return exactly )(\d+) steps", last_user_message(body))[-1])
    return Reply("\n".join(f"{i}. Do part {i}." for i in range(1, n + 1)))


def _form(**fields):
    data = {"name": "my-model", "endpoint": "role:generate", "model": "", "prompt_style": "inst", "max_tokens": "1024"}
    data.update(fields)
    return data


def test_the_demo_registers_its_leaderboard_models_once(demo):
    names = set(LanguageModel.objects.values_list("name", flat=True))
    assert {"claude-opus-4.5", "gemini-2.5-pro", "gpt-5", "qwen3-8b-instruct"} <= names
    assert LanguageModel.objects.get(name="gpt-5").reasoning is True
    assert LanguageModel.objects.get(name="qwen3-8b-instruct").reasoning is False
    LanguageModel.objects.filter(name="gpt-5").update(max_tokens=4096)  # a user's change stays
    assert "0 leaderboard models registered" in judging_demo.load()
    assert LanguageModel.objects.get(name="gpt-5").max_tokens == 4096
    assert LanguageModel.objects.filter(name="gpt-5").count() == 1


def test_a_model_registered_from_the_runs_page_with_an_endpoint_record_runs_there(
    demo, settings, researcher_client, admin_client_
):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM() as server:
        server.default = _steps
        record = endpoint_record_create(name="gpu-1", base_url=server.base_url, model="served-model", api_key=KEY)
        page = researcher_client.get(reverse("judging_runs")).content.decode()
        assert 'id="register-model-form"' in page and f'value="record:{record.pk}"' in page and "gpt-5" in page
        response = researcher_client.post(
            reverse("language_models"),
            _form(name="qwen3-8b-on-gpu-1", endpoint=f"record:{record.pk}", model="Qwen/Qwen3-8B", max_tokens="512"),
        )
        assert response.status_code == 302 and response["Location"] == reverse("judging_runs")
        model = LanguageModel.objects.get(name="qwen3-8b-on-gpu-1")
        assert model.base_url == server.base_url and model.model == "Qwen/Qwen3-8B" and model.max_tokens == 512
        page = researcher_client.get(reverse("judging_runs")).content.decode()
        assert "qwen3-8b-on-gpu-1" in page and "endpoint record gpu-1" in page

        # An admin starts a generation run with it from the same page; it goes to the record, with its key.
        response = admin_client_.post(
            reverse("generation_run_launch"),
            {
                "name": "gpu-run",
                "language_model": model.pk,
                "split": "bench",
                "sample_per_topic": "1",
                "seed": "0",
                "prompt_file": "",
                "executor": "online",
                "concurrency": "4",
                "budget_usd": "",
            },
        )
        assert response.status_code == 302
        run = GenerationRun.objects.get(name="gpu-run")
        assert generation_run_execute(run_id=run.pk) == "done"
        requests = server.chat_requests()
        assert requests and {r["model"] for r in requests} == {"Qwen/Qwen3-8B"}
        assert set(server.authorizations) == {f"Bearer {KEY}"}
        assert requests[0]["max_tokens"] == 512
        run.refresh_from_db()
        assert run.llm_job is not None and run.llm_job.endpoint_record_id == record.pk
        assert run.generations.count() == len(run.procedure_ids) > 0


def test_a_model_on_a_role_follows_the_role_when_the_run_starts(demo, settings, researcher_client):
    with ScriptedLLM() as server:
        server.default = _steps
        record = endpoint_record_create(name="generate-endpoint", base_url=server.base_url, model="default-model")
        from llm.endpoint_services import endpoint_role_assign

        response = researcher_client.post(reverse("language_models"), _form(name="role-model"))
        assert response.status_code == 302
        model = LanguageModel.objects.get(name="role-model")
        assert model.role == "generate" and model.base_url == "" and model.model == ""
        endpoint_role_assign(role="generate", record=record)  # assigned after registering
        from judging.services import generation_run_create

        run = generation_run_create(name="role-run", language_model=model, sample_per_topic=1, start=False)
        assert generation_run_execute(run_id=run.pk) == "done"
        assert {r["model"] for r in server.chat_requests()} == {"default-model"}


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("name", "", "required"),
        ("name", "n" * 201, "at most 200"),
        ("name", "gpt-5", "registered already"),
        ("endpoint", "record:999999", "Select a valid choice"),
        ("model", "m" * 201, "at most 200"),
        ("max_tokens", "0", "from 1"),
        ("max_tokens", "12abc", "from 1"),
        ("prompt_style", "shell", "Select a valid choice"),
    ],
)
def test_hostile_registrations_are_refused_naming_the_field(demo, researcher_client, field, value, message):
    before = LanguageModel.objects.count()
    response = researcher_client.post(reverse("language_models"), _form(**{field: value}))
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page and f'id="id_{field}"' in page
    api_value = int(value) if field == "max_tokens" and value.isdigit() else value
    api = researcher_client.post("/api/judging/models/", {**_form(), field: api_value}, content_type="application/json")
    assert api.status_code == 400 and field in api.json()
    assert LanguageModel.objects.count() == before


def test_models_api_lists_and_registers_for_researchers_only(demo, researcher_client):
    listed = researcher_client.get("/api/judging/models/").json()["results"]
    assert {"gpt-5", "qwen3-8b-instruct"} <= {m["name"] for m in listed}
    created = researcher_client.post(
        "/api/judging/models/",
        {"name": "api-model", "endpoint": "role:how2score_judge", "reasoning": True, "max_tokens": 2048},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["role"] == "how2score_judge" and created.json()["served_by"] == "role how2score_judge"
    assert researcher_client.get(f"/api/judging/models/{created.json()['id']}/").json()["max_tokens"] == 2048
    assert Client().get("/api/judging/models/").status_code == 401
    assert Client().post("/api/judging/models/", {"name": "x"}, content_type="application/json").status_code == 401
    anonymous = Client().get(reverse("language_models"))
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
