"""Safe defaults and hardened production settings (issue 18, item 3).

* The embedded default (`make run`, config.django.base) runs with DEBUG off, and its pages
  still get their CSS and JS (WhiteNoise after collectstatic).
* Error pages (400, 403, 404, 500) are the product's own and never show a setting or a
  traceback; the 400 page says what was wrong when a view raised BadRequest.
* Secrets are masked in error reports (the technical 500 page with DEBUG on included) and in
  every log line.
* Production settings refuse a weak SECRET_KEY and DEBUG=true, default to HTTPS with HSTS,
  trust the proxy header only when told to, and pass `check --deploy` clean.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import secrets
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import URLPattern

from config.settings.security import secret_key_problem
from core.log_filters import SecretMaskingFilter
from tests.services import BASE_DIR

BROKER_PASSWORD = "hunter2-broker-Pw"
RESULTS_PASSWORD = "s3cret-results-Pw"
LLM_PASSWORD = "llm-proxy-Pw-42"
DATABASE_PASSWORD = "db-Pass-Word-7"
BROKER_URL = f"redis://:{BROKER_PASSWORD}@redis.internal:6379/0"
RESULTS_URL = f"redis://worker:{RESULTS_PASSWORD}@redis.internal:6379/1"
LLM_URL = f"https://team:{LLM_PASSWORD}@llm.example/v1"
DATABASE_URL = f"postgres://app:{DATABASE_PASSWORD}@db.internal:5432/how2"
ALL_PASSWORDS = (BROKER_PASSWORD, RESULTS_PASSWORD, LLM_PASSWORD, DATABASE_PASSWORD)


@pytest.fixture
def secret_urls(settings):
    settings.CELERY_BROKER_URL = BROKER_URL
    settings.CELERY_RESULT_BACKEND = RESULTS_URL
    settings.LLM_DEFAULT_ENDPOINT = {**settings.LLM_DEFAULT_ENDPOINT, "base_url": LLM_URL}
    settings.LLM_BASE_URL = LLM_URL
    settings.DATABASE_URL = DATABASE_URL
    return settings


def _no_password_in(text: str) -> None:
    for password in ALL_PASSWORDS:
        assert password not in text, f"{password!r} leaked"


# --- error pages and reports ---------------------------------------------------------------


@pytest.mark.urls("tests.security.error_urls")
def test_technical_500_page_with_debug_on_does_not_show_url_passwords(secret_urls, db):
    secret_urls.DEBUG = True
    client = Client(raise_request_exception=False)
    # runserver copies the process environment into request.META: the page lists it.
    response = client.get("/boom/", CELERY_BROKER_URL=BROKER_URL, DATABASE_URL=DATABASE_URL)
    assert response.status_code == 500
    page = response.content.decode()
    assert "Traceback" in page and "RuntimeError" in page  # the technical page, with its details
    assert "redis://:********@redis.internal:6379/0" in page
    _no_password_in(page)


@pytest.mark.urls("tests.security.error_urls")
def test_technical_500_page_hides_the_login_password_with_debug_on(secret_urls, db):
    from django.views.decorators.debug import sensitive_post_parameters

    secret_urls.DEBUG = True
    request_password = "typed-Password-99"
    from tests.security import error_urls

    original = error_urls.broker_down
    boom = error_urls.urlpatterns[0]
    assert isinstance(boom, URLPattern)
    try:
        boom.callback = sensitive_post_parameters("password")(original)
        response = Client(raise_request_exception=False).post(
            "/boom/", {"username": "rita", "password": request_password}
        )
    finally:
        boom.callback = original
    assert response.status_code == 500
    assert request_password not in response.content.decode()


@pytest.mark.urls("tests.security.error_urls")
def test_with_debug_off_a_500_shows_the_products_page_and_nothing_of_the_server(secret_urls, db):
    secret_urls.DEBUG = False
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong on our side" in page
    for detail in ("Traceback", "RuntimeError", "CELERY_BROKER_URL", "redis.internal", "SECRET_KEY"):
        assert detail not in page
    _no_password_in(page)


@pytest.mark.urls("tests.security.error_urls")
def test_400_page_says_what_a_view_found_wrong(db):
    response = Client().get("/bad/")
    assert response.status_code == 400
    assert "steps: expected a list of at most 15 steps" in response.content.decode()
    assert "Bad request" in response.content.decode()


@pytest.mark.urls("tests.security.error_urls")
def test_400_page_does_not_repeat_a_suspicious_operations_details(db):
    response = Client().get("/suspicious/")
    assert response.status_code == 400
    page = response.content.decode()
    assert "Bad request" in page and "/srv/private" not in page


def test_a_forged_host_header_gets_the_plain_400_page_not_the_allowed_hosts(db):
    response = Client().get("/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    page = response.content.decode()
    assert "Bad request" in page
    assert "ALLOWED_HOSTS" not in page and "evil.example" not in page


def test_404_page_is_the_products_own(db):
    response = Client().get("/no/such/page/")
    assert response.status_code in (302, 404)  # anonymous users are sent to the login page first
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="walker", password="walker-Password-1")
    client = Client()
    client.force_login(user)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "There is nothing at this address" in page and "URLconf" not in page


# --- log lines -----------------------------------------------------------------------------


def _configured_handlers() -> list[logging.Handler]:
    handlers = list(logging.getLogger().handlers) + list(logging.getLogger("django.server").handlers)
    return [h for h in handlers if isinstance(h, logging.StreamHandler) and type(h).__module__.startswith("logging")]


def test_every_configured_log_handler_masks_secrets():
    handlers = _configured_handlers()
    assert handlers, "no handler configured"
    for handler in handlers:
        assert any(isinstance(f, SecretMaskingFilter) for f in handler.filters), handler


def test_log_lines_and_tracebacks_mask_url_credentials(secret_urls):
    stream = io.StringIO()
    console = next(
        h for h in logging.getLogger().handlers if any(isinstance(f, SecretMaskingFilter) for f in h.filters)
    )
    assert isinstance(console, logging.StreamHandler)
    previous = console.setStream(stream)
    try:
        log = logging.getLogger("tests.security.masking")
        log.error("broker %s is down", BROKER_URL)
        try:
            raise ConnectionError(f"cannot connect to {DATABASE_URL} or {LLM_URL}")
        except ConnectionError:
            log.exception("database unreachable")
        logging.getLogger("django.request").error("Internal Server Error: /x/ (results at %s)", RESULTS_URL)
    finally:
        console.setStream(previous)
    text = stream.getvalue()
    assert "redis://:********@redis.internal" in text and "postgres://app:********@db.internal" in text
    assert "ConnectionError" in text  # the traceback is still there, masked
    _no_password_in(text)


def test_known_secret_values_are_masked_in_log_lines(settings):
    settings.SECRET_KEY = "k" + secrets.token_urlsafe(50)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "key is %s", (settings.SECRET_KEY,), None)
    SecretMaskingFilter().filter(record)
    assert settings.SECRET_KEY not in record.getMessage()
    assert "********" in record.getMessage()


def test_celery_worker_log_handlers_get_the_masking_filter():
    from config.celery import mask_secrets_in_worker_logs

    logger = logging.Logger("worker-test")
    handler = logging.StreamHandler(io.StringIO())
    logger.addHandler(handler)
    mask_secrets_in_worker_logs(logger=logger)
    mask_secrets_in_worker_logs(logger=logger)  # idempotent
    assert sum(isinstance(f, SecretMaskingFilter) for f in handler.filters) == 1
    logger.error("broker %s", BROKER_URL)
    assert BROKER_PASSWORD not in handler.stream.getvalue()


# --- the embedded default ------------------------------------------------------------------


def _settings_in_subprocess(env_overrides: dict[str, str], names: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DEBUG",
            "SECRET_KEY",
            "HTTPS_ONLY",
            "TRUST_PROXY_HEADERS",
            "SECURE_COOKIES",
            "SECURE_HSTS_SECONDS",
            "SECURE_HSTS_PRELOAD",
            "DATABASE_URL",
        )
    }
    env.update(VAR_DIR=str(tmp_path), **env_overrides)
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {names!r}}}, default=str))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_embedded_default_runs_with_debug_off(tmp_path):
    result = _settings_in_subprocess({"DJANGO_SETTINGS_MODULE": "config.django.base"}, ["DEBUG"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"DEBUG": False}


def test_pages_get_their_css_and_js_with_debug_off(settings, tmp_path, researcher, demo):
    assert settings.DEBUG is False
    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", interactive=False, verbosity=0)
    client = Client()  # a new handler: WhiteNoise indexes STATIC_ROOT when it starts
    client.force_login(researcher)
    pages = [client.get(url).content.decode() for url in ("/login/", "/", "/leaderboard/")]
    assets = {a for page in pages for a in re.findall(r'(?:href|src)="(/static/[^"]+)"', page)}
    assert any(a.endswith(".css") for a in assets) and any(a.endswith(".js") for a in assets), assets
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        if isinstance(response, StreamingHttpResponse):
            body = b"".join(response.streaming_content)
        else:
            body = response.content
        assert body, asset


# --- production settings -------------------------------------------------------------------

PRODUCTION = "config.django.production"
SECURITY_SETTINGS = [
    "DEBUG",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_PROXY_SSL_HEADER",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
]


def _good_key() -> str:
    return secrets.token_urlsafe(50)


def test_manage_py_check_deploy_is_clean_with_the_production_settings(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DEBUG",
            "HTTPS_ONLY",
            "TRUST_PROXY_HEADERS",
            "SECURE_COOKIES",
            "SECURE_HSTS_SECONDS",
            "SECURE_HSTS_PRELOAD",
            "DATABASE_URL",
            "ALLOWED_HOSTS",
            # set in this process by the browser tests' fixture, never in a deployment
            "DJANGO_ALLOW_ASYNC_UNSAFE",
        )
    }
    env.update(DJANGO_SETTINGS_MODULE=PRODUCTION, SECRET_KEY=_good_key(), VAR_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_defaults_to_https_redirect_hsts_and_secure_cookies_without_trusting_the_proxy(tmp_path):
    result = _settings_in_subprocess(
        {"DJANGO_SETTINGS_MODULE": PRODUCTION, "SECRET_KEY": _good_key()}, SECURITY_SETTINGS, tmp_path
    )
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.splitlines()[-1])
    assert values == {
        "DEBUG": False,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 365 * 24 * 3600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_PROXY_SSL_HEADER": None,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
    }


def test_production_trusts_the_proxy_header_only_when_told_and_https_can_be_switched_off(tmp_path):
    result = _settings_in_subprocess(
        {"DJANGO_SETTINGS_MODULE": PRODUCTION, "SECRET_KEY": _good_key(), "TRUST_PROXY_HEADERS": "true"},
        SECURITY_SETTINGS,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]

    result = _settings_in_subprocess(
        {"DJANGO_SETTINGS_MODULE": PRODUCTION, "SECRET_KEY": _good_key(), "HTTPS_ONLY": "false"},
        SECURITY_SETTINGS,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    local = json.loads(result.stdout.splitlines()[-1])
    assert (local["SECURE_SSL_REDIRECT"], local["SECURE_HSTS_SECONDS"], local["SESSION_COOKIE_SECURE"]) == (
        False,
        0,
        False,
    )


@pytest.mark.parametrize(
    "key, reason",
    [
        ("x" * 60, "distinct characters"),
        ("short-but-random-Q7#", "characters long"),
        ("django-insecure-" + "a1b2c3d4e5" * 5, "django-insecure-"),
    ],
)
def test_production_refuses_a_weak_secret_key(tmp_path, key, reason):
    result = _settings_in_subprocess({"DJANGO_SETTINGS_MODULE": PRODUCTION, "SECRET_KEY": key}, ["DEBUG"], tmp_path)
    assert result.returncode != 0
    assert reason in result.stderr
    assert key not in result.stderr  # the refused key is not echoed either


def test_production_refuses_debug_true(tmp_path):
    result = _settings_in_subprocess(
        {"DJANGO_SETTINGS_MODULE": PRODUCTION, "SECRET_KEY": _good_key(), "DEBUG": "true"}, ["DEBUG"], tmp_path
    )
    assert result.returncode != 0
    assert "DEBUG=true is refused in production mode" in result.stderr


def test_secret_key_rule_matches_djangos_own_check():
    assert secret_key_problem(_good_key()) is None
    assert secret_key_problem("") and secret_key_problem(None)
    assert secret_key_problem("ab" * 40)  # 2 distinct characters
