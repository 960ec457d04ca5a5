"""The API keeps the promises of its own OpenAPI schema (issue 28, F-12): schemathesis, run
against the schema the product serves, finds no server error and no response the schema does
not describe, as an admin and as a researcher.

schemathesis reads ``/api/schema/`` from the Django application in this process (WSGI: no
server, no network) and sends every operation of it requests generated from the schema: the
schema's examples, the coverage phase's boundary and invalid values, and generated requests
(fuzzing), each through the whole middleware stack and authenticated with an API token. Each
response goes through schemathesis' built-in checks: not a server error (5xx), a status code the
operation documents, the documented content type and headers, a body valid against the
documented schema, a request the schema calls valid not refused (``positive_data_acceptance``),
one it calls invalid not accepted (``negative_data_rejection``), a request without the token
refused (``ignored_auth``), an undocumented method answered 405.

What the data gives the run: the demo data of every app is loaded, and a generated request that
the schema calls valid names, every other time, an object that exists (a path's id or slug,
``judge``/``a``/``b``/``set``/``task_set`` in a query, a role's ``record``, a model's
``endpoint``, a study's items file): a schema says what a well-formed name is, not which names
are stored, and an unknown one is rightly refused (400, or 404 for a path). The judge role
points at the tests' scripted LLM server on 127.0.0.1 (tests/scripted_llm.py), so ``POST
/api/reward`` judges instead of answering 503 for want of a judge, and Prolific's API is the
tests' scripted Prolific server (tests/scripted_prolific.py), which knows one token: a token an
operation saves is refused there (409, settings to fix), never an address that does not resolve.

Reproducible and bounded: a fixed seed, Hypothesis derandomized, no example database, no
shrinking, ``MAX_EXAMPLES`` generated requests per operation and phase (``RESEARCHER_EXAMPLES``
as a researcher, without the coverage phase: the researcher's run is about what that role is
answered, and the admin's run already sends the coverage phase's values), and a time budget
per role (``TIME_BUDGET_SECONDS``): a run that exceeds it fails, naming how far it got, rather
than quietly testing less.

Nothing is excluded: every operation of the schema is exercised with every built-in check, with
one narrow exception: a negative case sent as a form (multipart/form-data) is not required to be
refused, because a form carries text only and a case whose mutation is a type (``false`` for
``"false"``, ``1`` for ``"1"``) reaches the server as the very bytes of a valid one (a JSON body's
negative cases are all checked). Two generation settings follow from the schema language, not
from the product: strings carry no
NUL character (``allow-x00`` off: the product refuses NUL in any parameter, key or value before
a view runs, tests/test_api_json_errors.py, and OpenAPI 3.0 cannot say so for a key), and no
parameter the schema does not declare is invented (``allow-extra-parameters`` off: DRF ignores
unknown body keys and query parameters, which OpenAPI 3.0 cannot express for a query)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

pytestmark = [pytest.mark.sqlite, pytest.mark.timeout(600)]

SEED = 28
MAX_EXAMPLES = 1
RESEARCHER_EXAMPLES = 1
TIME_BUDGET_SECONDS = 240
SCHEMA_URL = "/api/schema/?format=json"
# The undocumented methods the coverage phase sends each operation (405 expected).
UNEXPECTED_METHODS = ["delete"]


def _config(*, token: str, max_examples: int, coverage: bool) -> Any:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "headers": {"Authorization": f"Token {token}"},
            "generation": {
                "max-examples": max_examples,
                "deterministic": True,
                "no-shrink": True,
                "database": "none",
                "allow-x00": False,
                "allow-extra-parameters": False,
            },
            "phases": {
                "coverage": {"enabled": coverage, "unexpected-methods": UNEXPECTED_METHODS},
                "stateful": {"enabled": False},
            },
        }
    )


@pytest.fixture
def in_process(db):
    """WSGI requests in this thread see the test's transaction: Django's request signals would
    close the connection (and lose it) after each one, as its test client knows to prevent."""
    import logging

    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_log = logging.getLogger("django.request")
    level = request_log.level
    request_log.setLevel(logging.ERROR)  # thousands of 4xx warnings are the point, not news
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    request_log.setLevel(level)


@pytest.fixture
def api_data(in_process, settings, tmp_path):
    """The demo data of every app, a corpus and a goal-step task set for the launches to name,
    every LLM role on the scripted LLM server and Prolific's API on the scripted Prolific server."""
    from core.demo import demo_loaders
    from goalstep.constants import TASKS
    from goalstep.models import TaskItem, TaskSet
    from mining.corpus_services import corpus_import
    from mining.models import Topic
    from tests.scripted_llm import ScriptedLLM
    from tests.scripted_prolific import ScriptedProlific

    for _label, loader in demo_loaders():
        loader()
    documents = tmp_path / "documents.jsonl"
    topic = Topic.objects.order_by("pk").first()
    documents.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"doc-{i}",
                    "text": f"How to boil an egg, take {i}: put it in water, boil it, cool it.",
                    "topic": topic.name if topic else "",
                }
            )
            + "\n"
            for i in range(3)
        )
    )
    corpus_import(name="st-corpus", path=documents)
    for task in TASKS:
        task_set = TaskSet.objects.create(task=task, split="bench", n_items=1)
        TaskItem.objects.create(
            task_set=task_set, item_id="st-1", position=0, prompt="Which one?", candidates=["a", "b"], label=0
        )
    prolific = ScriptedProlific().start()
    settings.PROLIFIC_API_URL = prolific.base_url
    settings.PROLIFIC_SITE_URL = "https://studio.example.org"  # webhooks go only to a public https address
    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.01
    try:
        with ScriptedLLM() as server:
            settings.LLM_ROLES = {
                role: {**values, "base_url": server.base_url, "api_key": "k", "model": "scripted"}
                for role, values in settings.LLM_ROLES.items()
            }
            yield
    finally:
        prolific.stop()
        from annotate.kinds.rubric.services import rubric_kinds_forget

        rubric_kinds_forget()  # the rubrics the run stored are rolled back: so are their kinds


def _token(role: str, username: str) -> str:
    from django.contrib.auth import get_user_model

    from core.services import api_token_create, user_create

    user_create(username=username, role=role, password=f"{username}-Password-1")
    user = get_user_model().objects.get(username=username)
    return api_token_create(user=user, label="schemathesis").secret


class _WsgiGet:
    def __init__(self, client: Any, token: str) -> None:
        self.client, self.token = client, token

    def get(self, url: str) -> Any:
        return self.client.get(url, headers={"Authorization": f"Token {self.token}"})


class StoredNames:
    """Names of stored objects, read through the API itself: for a path, the values of its
    parameters that exist (each parameter from the list its path starts with); for a query or
    body, the values that name something."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._lists: dict[str, list[Any]] = {}
        self.query = self._query_values()

    def _rows(self, url: str) -> list[Any]:
        if url not in self._lists:
            response = self.client.get(url)
            body = json.loads(response.get_data()) if response.status_code == 200 else []
            self._lists[url] = body.get("results", []) if isinstance(body, dict) else body
        return self._lists[url]

    def path_values(self, path: str) -> list[dict[str, Any]]:
        """Combinations of the path's parameters that name stored objects (a few per level)."""
        combinations: list[dict[str, Any]] = [{}]
        for match in re.finditer(r"\{([^}]+)\}", path):
            name = match.group(1)
            prefix = path[: match.start()]
            found = []
            for values in combinations:
                url = prefix
                for key, value in values.items():
                    url = url.replace("{" + key + "}", str(value))
                for row in self._rows(url)[:3]:
                    if isinstance(row, dict) and row.get(name if name == "slug" else "id") is not None:
                        found.append({**values, name: row[name if name == "slug" else "id"]})
            if not found:
                return []
            combinations = found
        return combinations

    def _query_values(self) -> dict[str, list[Any]]:
        from annotate.demo import DEMO_JUDGE
        from goalstep.models import TaskSet
        from judging.models import Judgment

        models = list(
            Judgment.objects.filter(judge=DEMO_JUDGE)
            .values_list("generation__run__language_model__name", flat=True)
            .distinct()
            .order_by("generation__run__language_model__name")
        )
        splits = list(
            Judgment.objects.filter(judge=DEMO_JUDGE)
            .exclude(generation__procedure__split="")
            .values_list("generation__procedure__split", flat=True)
            .distinct()
        )
        self.task_sets = dict(TaskSet.objects.order_by("pk").values_list("task", "pk"))
        return {
            "judge": [DEMO_JUDGE],
            "a": models[:1],
            "b": models[1:2] or models[:1],
            "task_set": list(self.task_sets.values()),
            "split": splits,
        }

    def launch_config(self, path: str, n: int) -> str | None:
        """A configuration the collection at ``path`` launches (names unique by ``n``)."""
        from goalstep.models import TaskSet
        from judging.models import GenerationRun
        from mining.models import Corpus

        run = GenerationRun.objects.filter(generations__isnull=False).order_by("pk").first()
        model = run.language_model.name if run else ""
        run_name = run.name.replace("'", "''") if run else ""
        task_set = TaskSet.objects.order_by("pk").first()
        corpus = Corpus.objects.order_by("pk").first()
        configs = {
            "/api/judging/generation-runs/": f"name: st-gen-{n}\nmodel: {model}\nsplit: bench\n",
            "/api/judging/judge-runs/": f"name: st-judge-{n}\ngeneration_run: '{run_name}'\njudge: st-judge-{n}\n",
            "/api/judging/components-runs/": f"name: st-components-{n}\ngeneration_run: '{run_name}'\n",
            "/api/coscript/runs/": (
                f"name: st-plan-{n}\nmodel: {model}\nsplit: bench\nk: 2\nfilter_mode: keyword\nscreen: false\n"
            ),
            "/api/goalstep/evaluations/": f"task_set: {task_set.pk if task_set else 0}\nmodel: {model}\n",
            "/api/mining/runs/": (
                f"name: st-mine-{n}\ncorpus: {corpus.name if corpus else 'none'}\ncandidates_per_topic: 1\ntopics: all\n"
            ),
        }
        return configs.get(path)


LIMIT_FIELDS = (
    "max_concurrency",
    "requests_per_minute",
    "tokens_per_minute",
    "price_input",
    "price_output",
    "context_length",
    "timeout_seconds",
)

# A valid items file of one critical-failure item (docs/annotation.md), for a study from a file.
ITEMS_FILE = (
    json.dumps(
        {
            "item_id": "st-1",
            "topic": "Food & Dining",
            "goal": "Boil an egg",
            "reference_steps": ["Put the egg in water.", "Boil it for 8 minutes.", "Cool it in cold water."],
            "candidate_steps": ["Put the egg in water.", "Boil it.", "Cool it."],
        }
    )
    + "\n"
).encode()


def _name_stored_objects(case: Any, names: StoredNames, calls: Counter) -> None:
    """A request the schema calls valid names stored objects: its path every other time (an
    unknown id is a documented 404), its query and body always (an unknown name is a 400)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    label = case.operation.label
    calls[label] += 1
    n = calls[label]
    path, method = case.operation.path, case.operation.method.upper()
    # Copies: a generated case may share its dictionaries with the cases derived from it.
    combos = names.path_values(path) if case.path_parameters and n % 2 else []
    if combos:
        case.path_parameters = {**case.path_parameters, **combos[n // 2 % len(combos)]}
    if isinstance(case.query, dict):
        query = dict(case.query)
        for key, values in names.query.items():
            if key in query and values:
                query[key] = values[n % len(values)]
        if path.endswith("/data/") or path.endswith("/data/actions/"):
            # The data manager's topic and annotator name the study's own (another is a 400 naming
            # it), and its page exists only up to the last.
            for key in ("topic", "annotator"):
                query.pop(key, None)
            if "page" in query:
                query["page"] = 1
        task = (case.path_parameters or {}).get("task")
        if "set" in query and task in names.task_sets:
            query["set"] = names.task_sets[task]
        case.query = query
    if not isinstance(case.body, dict) or method not in ("POST", "PUT", "PATCH"):
        return
    case.body = dict(case.body)
    config = names.launch_config(path, n) if method == "POST" else None
    if config is not None:
        case.body["config"] = config
        if "corpus" in case.body:
            case.body["corpus"] = "st-corpus"
    elif path == "/api/rubrics/":
        # A rubric is checked as a whole (each type's own fields); its key is unique.
        rubric = {
            "key": f"st_rubric_{n}",
            "title": "Schema test",
            "instructions": "Answer.",
            "questions": [{"id": "ok", "type": "yes_no", "prompt": "Fine?", "required": True}],
        }
        if "file" in case.body:
            case.body["file"] = json.dumps(rubric).encode()
        else:
            case.body = rubric
    elif path == "/api/llm/roles/":
        case.body["record"] = None
    elif path == "/api/judging/models/":
        case.body["endpoint"] = "role:generate"
        case.body["name"] = f"st-model-{n}"
    if path.startswith("/api/llm/endpoints/") and method in ("POST", "PATCH"):
        # A unique name, and a host the outbound rules let through (they refuse unspecified,
        # private and link-local addresses that the schema's URL cannot tell apart).
        if "name" in case.body:
            case.body["name"] = f"st-endpoint-{method}-{n}"
        if "base_url" in case.body:
            case.body["base_url"] = "http://127.0.0.1:9/v1"
        # The limits and prices are text the service reads as the page's form (whole numbers
        # within each limit's range, prices); their ranges are not in the schema. An
        # api_key_env: only names on the allow-list are taken (docs/security.md).
        for key in (*LIMIT_FIELDS, "api_key_env"):
            if key in case.body:
                case.body[key] = ""
    elif path.endswith("/data/actions/"):
        # A selection is item ids of the study or every item matching: the latter, for an
        # action whose parameters are all optional.
        case.body.pop("items", None)
        case.body.update({"all_matching": True, "action": "export", "format": "jsonl"})
    elif path.endswith("/reviews/") and case.body.get("decision") == "correct":
        # A correction's answer has the shape of the study's kind, which the schema cannot say
        # (one endpoint serves every kind): the annotation's own answer, an answer of that shape.
        from annotate.models import Annotation

        ids = case.body.get("annotation_ids") or [0]
        own = Annotation.objects.filter(pk=ids[0]).values_list("answer", flat=True).first()
        case.body["answer"] = own if own is not None else {}
    elif path.endswith("/data/items/"):
        # Items come from a file or from a judge's generations, as a new study's do (below).
        if case.media_type == "multipart/form-data":
            case.body.pop("judge", None)
            case.body["items_file"] = ITEMS_FILE
        else:
            case.body.pop("items_file", None)
            for key in ("topics", "models"):
                case.body.pop(key, None)
            case.body["judge"] = names.query["judge"][0]
            case.body["n_judged"] = 2
    elif path == "/api/studies/" and method == "POST":
        # Settings that depend on the kind and the items (a page of items is for multiple
        # choice; qualification needs items with answers, attention checks attention items; a
        # maximum of annotators is for dynamic k, active selection and a target width need the
        # judge's label on every item): the service names the conflict.
        for key in (
            "items_per_page",
            "qualification_enabled",
            "attention_check_rate",
            "allocation_policy",
            "max_annotators_per_item",
            "target_interval_width",
        ):
            case.body.pop(key, None)
        case.body["slug"] = f"st-study-{n}"  # a slug is unique: one taken is refused by name
        if case.media_type == "multipart/form-data":  # from a file
            case.body.pop("judge", None)
            case.body["items_file"] = ITEMS_FILE
        else:  # from judged generations, all of the judge's
            case.body.pop("items_file", None)
            for key in ("judge_runs", "topics", "models"):
                case.body.pop(key, None)
            case.body["judge"] = names.query["judge"][0]
            case.body["n_judged"] = 2  # a sample from a judge says its size


def _exercise(
    role: str, username: str, *, max_examples: int, coverage: bool, shard: int = 0, shards: int = 1
) -> dict[str, Any]:
    """Run every operation (of this shard: the operations whose position in the schema is
    ``shard`` modulo ``shards``); what was sent, answered and found."""
    from schemathesis.core.result import Ok
    from schemathesis.pytest.lazy import get_all_tests
    from schemathesis.specs.openapi.checks import negative_data_rejection
    from werkzeug.test import Client

    from config.wsgi import application

    token = _token(role, username)
    # Through WSGI like schemathesis' requests: Django's test client would connect the request
    # signals again that in_process took away.
    names = StoredNames(_WsgiGet(Client(application), token))
    schema = schemathesis.openapi.from_wsgi(
        SCHEMA_URL,
        application,
        config=_config(token=token, max_examples=max_examples, coverage=coverage),
        headers={"Authorization": f"Token {token}"},
    )
    statuses: Counter = Counter()
    positive_calls: Counter = Counter()

    def check(case: Any) -> None:
        _name_stored_objects(case, names, positive_calls)
        response = case.call()
        statuses[response.status_code] += 1
        excluded = []
        if case.media_type == "multipart/form-data" and case.meta and not case.meta.generation.mode.is_positive:
            excluded = [negative_data_rejection]  # a form carries text only (module docstring)
        case.validate_response(response, excluded_checks=excluded)

    failures: list[str] = []
    operations = 0
    started = time.monotonic()
    every = list(get_all_tests(schema=schema, test_func=check, settings=None, given_kwargs=None))
    tests = [result for position, result in enumerate(every) if position % shards == shard]
    for result in tests:
        if not isinstance(result, Ok):
            failures.append(f"the schema cannot be tested: {result.err()}")
            continue
        operation, test = result.ok()
        try:
            test()
        except (Exception, BaseExceptionGroup) as exc:  # FailureGroup: each distinct failure of the operation
            failures.append(f"{operation.label}:\n{exc}")
        operations += 1
        elapsed = time.monotonic() - started
        if elapsed > TIME_BUDGET_SECONDS:
            failures.append(
                f"time budget of {TIME_BUDGET_SECONDS} s spent after {operations} of {len(tests)} operations"
            )
            break
    return {
        "operations": operations,
        "of": len(tests),
        "requests": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "seconds": round(time.monotonic() - started, 1),
        "failures": failures,
    }


def _report(role: str, outcome: dict[str, Any]) -> str:
    summary = (
        f"{role}: {outcome['operations']} of {outcome['of']} operations, {outcome['requests']} requests "
        f"in {outcome['seconds']} s, statuses {outcome['statuses']}"
    )
    print(summary)
    return summary + "\n\n" + "\n\n".join(outcome["failures"])


ADMIN_SHARDS = 4


@pytest.mark.parametrize("shard", range(ADMIN_SHARDS))
def test_every_operation_keeps_its_schema_for_an_admin(api_data, shard):
    """In four parts of the operations, which the test run's two workers share: in two halves,
    one took 4.5 times the other (146 s against 32 s on a loaded machine). The costliest
    operation alone, ``POST /api/studies/`` (about 600 requests, each creating a study), takes
    17 s of its part's 39 s; the other three parts take 7–19 s (SQLite, load 3–5)."""
    from core.roles import ROLE_ADMIN

    outcome = _exercise(
        ROLE_ADMIN, "schema-admin", max_examples=MAX_EXAMPLES, coverage=True, shard=shard, shards=ADMIN_SHARDS
    )
    assert outcome["operations"] == outcome["of"] > 25
    assert not outcome["failures"], _report("admin", outcome)
    _report("admin", outcome)


def test_every_operation_keeps_its_schema_for_a_researcher(api_data):
    from core.roles import ROLE_RESEARCHER

    outcome = _exercise(ROLE_RESEARCHER, "schema-researcher", max_examples=RESEARCHER_EXAMPLES, coverage=False)
    assert outcome["operations"] == outcome["of"] > 100
    assert not outcome["failures"], _report("researcher", outcome)
    _report("researcher", outcome)
