"""Every URL pattern, as every role, with hostile values in every parameter and form field:
no answer is a 500 (the test client re-raises a view's exception, so a crash fails here with
its traceback).

The parameter names are not listed by hand: they are read from the source (every
``GET``/``POST``/``query_params``/``data`` lookup of a literal name) and from every form class
of the project's apps, so a parameter added later is attacked too."""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django import forms
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.module_data import module_transaction

pytestmark = pytest.mark.django_db

PROJECT_APPS = ("core", "llm", "mining", "judging", "goalstep", "coscript", "annotate")

HOSTILE_VALUES = [
    "NaN",
    "Infinity",
    "-1",
    "99999999999999999999",
    "2147483648",
    "a\x00b",
    "<script>alert(1)</script>",
    "javascript:alert(1)//",
    "=cmd|' /C calc'!A0",
    "x" * 5000,
    "[" * 500,
    "%",
    "' OR '1'='1",
]

#: Values of path parameters, by converter and name: real ones (so views reach their
#: deeper code) and hostile ones (beyond every integer column, odd strings).
INT_PATH_VALUES = ["1", "2", "2147483648", "99999999999999999999"]
STR_PATH_VALUES = {
    "action": ["pause", "resume", "cancel", "retry", "release", "x" * 300],
    "kind": ["generation", "judge", "components", "<script>"],
    "fmt": ["csv", "jsonl", "json", "exe"],
    "tier": ["gold", "harder", "../etc"],
    "task": ["step_inference", "goal_inference", "step_ordering", "NaN"],
    "item_id": ["1", "99999999999999999999", "<b>"],
    "format": ["json", "api", "csv"],
}
DEFAULT_STR_PATH_VALUES = ["x", "%00", "9" * 30]

_LOOKUP = re.compile(r"""\b(?:GET|POST|query_params|data)\s*(?:\.get(?:list)?\(|\[)\s*["']([A-Za-z_][\w-]*)["']""")


@functools.cache
def parameter_names() -> list[str]:
    """Every literal parameter name the project's code reads from a request, and every
    field of every form class of its apps."""
    names: set[str] = set()
    base = Path(settings.BASE_DIR)
    for app in PROJECT_APPS:
        for path in (base / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            names.update(_LOOKUP.findall(path.read_text(encoding="utf-8")))
        try:
            module = importlib.import_module(f"{app}.forms")
        except ModuleNotFoundError:
            continue
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, forms.BaseForm) and obj.__module__ == module.__name__:
                names.update(getattr(obj, "base_fields", {}).keys())
    names.update({"PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "page", "confirm", "next"})
    return sorted(names)


def routes() -> list[tuple[str, URLPattern]]:
    """(route text, pattern) of every URL of the project except the Django admin."""
    found: list[tuple[str, URLPattern]] = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if str(p.pattern).startswith("admin/"):
                    continue
                walk(p.url_patterns, prefix + str(p.pattern))
            else:
                found.append((prefix + str(p.pattern), p))

    walk(get_resolver().url_patterns, "")
    return found


_PARAM = re.compile(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>|\(\?P<(?P<rname>\w+)>[^)]*\)")


def concrete_urls(route: str, slugs: list[str], uuids: list[str], real_only: bool = False) -> list[str]:
    """Concrete paths for a route: each parameter in turn takes its values while the others
    keep their first (real) value; with ``real_only``, the one path of first values."""
    if route.startswith("api/^") or "(?P<" in route:
        # DRF router patterns are regular expressions.
        route = route.replace("^", "").replace("$", "").replace("\\.", ".")
        route = re.sub(r"/\?$", "/", route)
    params: list[tuple[str, list[str]]] = []
    for match in _PARAM.finditer(route):
        conv = match.group("conv") or ""
        name = match.group("name") or match.group("rname")
        if conv == "int" or name in ("pk",):
            values = INT_PATH_VALUES
        elif conv == "slug" or name == "slug":
            values = [*slugs, "no-such-study", "-" * 60]
        elif conv == "uuid":
            values = [*uuids, str(uuid.UUID(int=0))]
        elif conv == "drf_format_suffix":
            values = [".json", ".csv"]
        else:
            values = STR_PATH_VALUES.get(name, DEFAULT_STR_PATH_VALUES)
        params.append((match.group(0), values))
    if not params:
        return ["/" + route]
    if real_only:
        path = route
        for token, values in params:
            path = path.replace(token, values[0], 1)
        return ["/" + path]
    urls = []
    for index, (_, values) in enumerate(params):
        for value in values:
            path = route
            for other, (token, other_values) in enumerate(params):
                path = path.replace(token, value if other == index else other_values[0], 1)
            urls.append("/" + path)
    return sorted(set(urls))


def _crash_free(client: Client, method: str, url: str, value: str, **kwargs) -> tuple[str | None, int | None]:
    """What crashed (None when nothing did) and the status answered (None for a crash)."""
    try:
        response = getattr(client, method)(url, **kwargs)
    except Exception as exc:  # the test client re-raises what the view raised
        return f"{method.upper()} {url[:120]} with {value[:40]!r}: {exc.__class__.__name__}: {str(exc)[:200]}", None
    if response.status_code >= 500:
        return f"{method.upper()} {url[:120]} with {value[:40]!r}: HTTP {response.status_code}", response.status_code
    return None, response.status_code


@pytest.fixture(scope="module")
def demo_world(django_db_setup, django_db_blocker):
    """The demo data, loaded once for the module's tests on a worker (tests/module_data.py;
    loaded for each test, it had cost 3 s of each of the crawl's 20 tests)."""
    from annotate.models import Study

    with module_transaction(django_db_blocker):
        call_command("load_demo", verbosity=0)
        yield {"slugs": list(Study.objects.order_by("pk").values_list("slug", flat=True)[:3])}


@pytest.fixture
def world(demo_world, db, settings):
    # The System page's "check worker" waits for a worker that is not running here.
    settings.WORKER_PING_TIMEOUT_SECONDS = 0.05
    return demo_world


def _annotator_client(slug: str) -> tuple[Client, list[str]]:
    """An anonymous annotator who entered a study through its Prolific link and holds an item."""
    from annotate.models import Assignment

    client = Client()
    pid = "5f" + "0" * 21 + "a"
    client.get(f"/a/{slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": "s", "SESSION_ID": "t"})
    # Straight to the items: consent, training and qualification are tested elsewhere.
    from annotate.models import Participation, ParticipationState

    Participation.objects.filter(annotator__pid=pid).update(state=ParticipationState.ANNOTATING)
    client.get(f"/a/{slug}/work/")
    held = [
        str(u) for u in Assignment.objects.filter(participation__annotator__pid=pid).values_list("public_id", flat=True)
    ]
    return client, held


#: The crawl is split by route into this many shards per role: each a test of its own, so
#: pytest-xdist's workers share them and no one test runs for minutes (a shard is about a
#: fifth of a role's requests).
SHARDS = 5
#: The most requests one shard may send: the crawl is bounded by its count of requests, known
#: before it starts (``crawl_plan``), not by a clock. Measured: about 1,900 per shard.
MAX_REQUESTS_PER_SHARD = 4_000

FORM = "application/x-www-form-urlencoded"

_BODIES = (
    '{"a": ' * 2000 + "1" + "}" * 2000,
    '{"draft": {"verdict": NaN}, "seq": 1e999, "active_ms": Infinity}',
    "{names_nul}",
    "{names_huge}",
    json.dumps([{"goal": "g", "reference_steps": ["a"], "completion": "1. a"}] * 3),
    "not json at all",
)


def crawl_plan(slugs: list[str], uuids: list[str], shard: int = 0, shards: int = 1) -> list[tuple[str, str, str, dict]]:
    """Every request of one shard of the crawl, in order, as (route, method, url, client
    keyword arguments): each concrete path plainly (hostile path values), then the route's
    real path with every parameter and form field set to each hostile value, then hostile
    JSON bodies."""
    names = parameter_names()
    bodies = [
        json.dumps({name: "a\u0000b" for name in names})
        if body == "{names_nul}"
        else json.dumps({name: 10**30 for name in names})
        if body == "{names_huge}"
        else body
        for body in _BODIES
    ]
    plan: list[tuple[str, str, str, dict]] = []
    crawled = [
        route
        for route, _ in routes()
        if not route.startswith(("api/schema", "api/docs", "api/redoc", "vendor/", "logout/"))
    ]
    for route in crawled[shard::shards]:
        urls = concrete_urls(route, slugs, uuids)
        for url in urls:
            plan += [(route, "get", url, {}), (route, "post", url, {})]
        real = urls[0] if len(urls) == 1 else concrete_urls(route, slugs, uuids, real_only=True)[0]
        for value in HOSTILE_VALUES:
            params = {name: value for name in names}
            # The POST as a browser's form sends it (urlencoded): the view reads the same
            # request.POST as from a multipart body, at a fraction of the parsing (Django's
            # multipart parser, hostile bodies themselves: tests/security/test_request_bodies.py).
            form = {"data": urlencode(params), "content_type": FORM}
            plan += [(route, "get", real, {"data": params}), (route, "post", real, form)]
        for body in bodies:
            plan.append((route, "post", real, {"data": body, "content_type": "application/json"}))
    return plan


def _crawl(client: Client, slugs: list[str], uuids: list[str], shard: int = 0, shards: int = 1) -> list[str]:
    """Every crash, one line per route and kind of error (a defect that crashes a route for
    every value is reported once, so it hides no other).

    A method a path refuses (405 to its plain request, sent first) is not sent to it again with
    hostile parameters or bodies: the refusal comes before the view reads anything, and what
    the middleware does with hostile values is crawled on every path that takes the method.
    (The plan stays the bound: the crawl sends at most what it lists.)"""
    plan = crawl_plan(slugs, uuids, shard, shards)
    assert len(plan) <= MAX_REQUESTS_PER_SHARD, f"{len(plan)} requests in one shard: raise SHARDS"
    failures: list[str] = []
    seen: set[tuple[str, str]] = set()
    refused: set[tuple[str, str]] = set()  # (method, path) answered 405 without parameters
    for route, method, url, kwargs in plan:
        data = kwargs.get("data")
        if data is not None and (method, url) in refused:
            continue
        value = "(path)" if data is None else (data[:40] if isinstance(data, str) else next(iter(data.values()), ""))
        problem, status = _crash_free(client, method, url, value, **kwargs)
        if data is None and status == 405:
            refused.add((method, url))
        if problem is None:
            continue
        key = (route, problem.split(": ", 1)[-1][:80])
        if key not in seen:
            seen.add(key)
            failures.append(problem)
    return failures


def _report(failures: list[str]) -> str:
    return f"{len(failures)} kinds of crash:\n" + "\n".join(failures[:60])


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_url_crashes_for_an_anonymous_visitor_with_hostile_values(world, shard):
    failures = _crawl(Client(), world["slugs"], [str(uuid.uuid4())], shard, SHARDS)
    assert not failures, _report(failures)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_url_crashes_for_an_annotator_with_hostile_values(world, shard):
    client, held = _annotator_client(world["slugs"][0])
    assert held, "the annotator should hold an item of the demo study"
    failures = _crawl(client, world["slugs"], held, shard, SHARDS)
    assert not failures, _report(failures)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_url_crashes_for_a_researcher_with_hostile_values(world, researcher_client, shard):
    failures = _crawl(researcher_client, world["slugs"], [str(uuid.uuid4())], shard, SHARDS)
    assert not failures, _report(failures)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_url_crashes_for_an_admin_with_hostile_values(world, admin_client_, shard):
    failures = _crawl(admin_client_, world["slugs"], [str(uuid.uuid4())], shard, SHARDS)
    assert not failures, _report(failures)


def test_the_crawler_finds_the_parameters_and_urls_it_attacks():
    """The crawl is only as good as its lists: they must hold what the product reads."""
    names = parameter_names()
    for expected in ("q", "judge", "split", "seed", "items_file", "PROLIFIC_PID", "min_annotations_for_majority"):
        assert expected in names
    all_routes = [route for route, _ in routes()]
    assert len(all_routes) > 60
    assert any(route.startswith("a/<slug:slug>/work/<uuid:public_id>/save") for route in all_routes)
    urls = concrete_urls("runs/<str:kind>/<int:pk>/<str:action>/", ["s"], [])
    assert "/runs/generation/99999999999999999999/pause/" in urls
    assert "/runs/<script>/1/pause/" in urls


def test_the_shards_together_send_every_request_of_the_whole_crawl_once_and_each_is_bounded():
    slugs, uuids = ["demo"], [str(uuid.UUID(int=1))]
    whole = crawl_plan(slugs, uuids)
    parts = [crawl_plan(slugs, uuids, shard, SHARDS) for shard in range(SHARDS)]
    key = lambda r: (r[0], r[1], r[2], json.dumps(r[3], sort_keys=True, default=str))  # noqa: E731
    assert sorted(map(key, whole)) == sorted(key(r) for part in parts for r in part)
    assert all(0 < len(part) <= MAX_REQUESTS_PER_SHARD for part in parts), [len(p) for p in parts]
