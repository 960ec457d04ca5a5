"""Accounts (issue 18, item 8): login throttling with lockout on /login/ and /admin/login/, and
API tokens stored hashed, with an expiry, shown once, revocable, never listed in full."""

from __future__ import annotations

import hashlib
import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.models import ApiToken
from core.services import api_token_create

pytestmark = pytest.mark.django_db

RIGHT = "rita-Password-1"  # the researcher fixture's password


def _login(client: Client, username: str, password: str, url: str = "/login/", **extra):
    return client.post(url, {"username": username, "password": password}, **extra)


def _fail(client: Client, times: int, username: str = "rita", url: str = "/login/", **extra):
    """``times`` wrong passwords; every one but the last must get the login form back.
    Returns the last response (429 when it reached the limit)."""
    for attempt in range(times):
        response = _login(client, username, f"wrong-{attempt}", url, **extra)
        if attempt < times - 1:
            assert response.status_code == 200, (attempt, response.status_code)
    return response


@pytest.fixture
def limit(settings):
    settings.AXES_FAILURE_LIMIT = 5
    return 5


# --- login throttling ----------------------------------------------------------------------


def test_wrong_passwords_lock_the_username_out_even_for_the_right_password(researcher, limit):
    client = Client()
    _fail(client, limit - 1)
    locked = _login(client, "rita", "wrong-last")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    response = _login(client, "rita", RIGHT)
    assert response.status_code == 429
    assert "Even the right password is refused" in response.content.decode()
    assert client.get(reverse("home")).status_code == 302  # not logged in


def test_the_lockout_page_says_for_how_long(researcher, limit, settings):
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    client = Client()
    _fail(client, limit - 1)
    page = _login(client, "rita", "wrong").content.decode()
    assert f"After {limit} wrong passwords" in page and "for 15 minutes" in page


def test_lockout_is_per_username_and_address(researcher, admin_user, limit):
    client = Client()
    assert _fail(client, limit).status_code == 429
    assert _login(client, "rita", RIGHT).status_code == 429
    # Another username from the same address, and the same username from another address.
    assert _login(Client(), "ada", "ada-Password-1").status_code == 302
    elsewhere = _login(Client(), "rita", RIGHT, REMOTE_ADDR="10.9.8.7")
    assert elsewhere.status_code == 302 and elsewhere["Location"] == reverse("home")


def test_one_address_spraying_many_usernames_is_locked_out_of_every_login_form(researcher, admin_user, settings):
    settings.AXES_FAILURE_LIMIT = 5  # per username: never reached below
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 6
    sprayer = Client()
    for name in ["rita", "ada", "bob", "cy", "dee", "eve"]:
        assert _login(sprayer, name, "Summer2026!").status_code == 200  # one guess each: the form again
    refused = _login(sprayer, "rita", RIGHT)
    page = refused.content.decode()
    assert refused.status_code == 429 and "After 6 failed logins from your address, for any users" in page
    assert _login(sprayer, "ada", "ada-Password-1", url="/admin/login/").status_code == 429
    assert sprayer.get(reverse("home")).status_code == 302  # not logged in
    # The same accounts from another address, and the login form itself, are untouched.
    assert _login(Client(), "rita", RIGHT, REMOTE_ADDR="10.9.8.7").status_code == 302
    assert sprayer.get("/login/").status_code == 200


def test_address_failures_below_the_limit_and_successes_refuse_no_one(researcher, settings):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 3
    client = Client()
    _fail(client, 2, username="nobody")
    for _ in range(4):  # successes do not count
        assert _login(client, "rita", RIGHT).status_code == 302
        client.post(reverse("logout"))
    assert _login(client, "rita", RIGHT).status_code == 302


def test_lockout_ends_after_the_cool_off_and_a_success_resets_the_count(researcher, limit):
    from axes.models import AccessAttempt

    client = Client()
    _fail(client, limit)
    assert _login(client, "rita", RIGHT).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(hours=1))
    assert _login(client, "rita", RIGHT).status_code == 302
    # The success cleared the count: limit - 1 new failures do not lock out.
    _fail(Client(), limit - 1)
    assert _login(Client(), "rita", RIGHT).status_code == 302


def test_admin_login_is_throttled_too(admin_user, limit):
    client = Client()
    for attempt in range(limit - 1):
        assert _login(client, "ada", f"wrong-{attempt}", "/admin/login/").status_code == 200
    assert _login(client, "ada", "wrong", "/admin/login/").status_code == 429
    response = _login(client, "ada", "ada-Password-1", "/admin/login/")
    assert response.status_code == 429 and "Too many failed logins" in response.content.decode()


def test_forged_forwarded_for_does_not_dodge_the_lockout_without_a_trusted_proxy(researcher, limit):
    client = Client()
    for attempt in range(limit):
        _login(client, "rita", f"wrong-{attempt}", HTTP_X_FORWARDED_FOR=f"203.0.113.{attempt}")
    assert _login(client, "rita", RIGHT, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 429


def test_behind_a_trusted_proxy_the_address_it_appended_counts(researcher, limit, settings):
    settings.TRUST_PROXY_HEADERS = True
    client = Client()
    # The client forged the left entry; the proxy appended the real address on the right.
    _fail(client, limit, HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.5")
    assert _login(client, "rita", RIGHT, HTTP_X_FORWARDED_FOR="198.51.100.2, 203.0.113.5").status_code == 429
    assert _login(Client(), "rita", RIGHT, HTTP_X_FORWARDED_FOR="203.0.113.6").status_code == 302


def test_a_typed_password_is_never_stored_or_logged_but_the_failure_is(researcher, limit, caplog):
    typed = "Typed-Wrong-Password-77"
    client = Client()
    with caplog.at_level("WARNING"):
        for _ in range(limit):
            _login(client, "rita", typed)
    from axes.models import AccessAttempt

    stored = " ".join(f"{a.username} {a.get_data} {a.post_data}" for a in AccessAttempt.objects.all())
    assert "rita" in stored and typed not in stored
    assert typed not in caplog.text
    assert "Locking out" in caplog.text and 'username: "rita"' in caplog.text


@pytest.mark.parametrize("forwarded", ["unknown", "999.1.1.1", "x" * 5000, "1.2.3.4\x00"])
def test_a_garbage_forwarded_for_behind_a_trusted_proxy_is_not_a_server_error(researcher, settings, forwarded):
    settings.TRUST_PROXY_HEADERS = True
    assert _login(Client(), "rita", "wrong", HTTP_X_FORWARDED_FOR=forwarded).status_code == 200


@pytest.mark.parametrize("username", ["r" * 10_000, "rita\x00", "rita\u202e"])
def test_hostile_usernames_are_refused_without_a_server_error(researcher, username):
    response = _login(Client(), username, "whatever")
    assert response.status_code in (200, 400)


def test_a_username_that_is_not_utf8_is_refused_without_a_server_error(researcher):
    body = b"username=%ED%A0%80rita&password=x"  # an encoded lone surrogate
    response = Client().post("/login/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code in (200, 400)


# --- API tokens ----------------------------------------------------------------------------


def _stored_columns(token: ApiToken) -> list[str]:
    return [str(getattr(token, field.attname)) for field in ApiToken._meta.concrete_fields]


def test_a_new_token_is_shown_once_and_only_its_digest_is_stored(researcher_client, researcher):
    response = researcher_client.post(reverse("account"), {"action": "create", "label": "reward server"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    secret = response.context["created"].secret
    assert secret in response.content.decode() and len(secret) >= 40
    token = ApiToken.objects.get(user=researcher)
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret.startswith(token.prefix) and len(token.prefix) < len(secret) // 3
    assert not any(secret in value for value in _stored_columns(token))
    again = researcher_client.get(reverse("account"))
    assert "no-store" in again["Cache-Control"]
    page = again.content.decode()
    assert secret not in page and token.prefix in page and "reward server" in page


def test_a_token_authenticates_api_calls_until_it_is_revoked(researcher_client, researcher, demo):
    created = api_token_create(user=researcher)
    header: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Token {created.secret}"}
    assert Client().get("/api/procedures/", **header).status_code == 200
    created.token.refresh_from_db()
    assert created.token.last_used_at is not None
    researcher_client.post(reverse("account"), {"action": "revoke", "token": created.token.pk})
    assert Client().get("/api/procedures/", **header).status_code == 401


def test_an_expired_token_is_refused(researcher, demo, settings):
    created = api_token_create(user=researcher)
    ApiToken.objects.filter(pk=created.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = Client().get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {created.secret}")
    assert response.status_code == 401 and "expired" in response.json()["detail"]


def test_tokens_expire_after_api_token_days(researcher, settings):
    settings.API_TOKEN_DAYS = 7
    token = api_token_create(user=researcher).token
    assert timedelta(days=7) - timedelta(minutes=1) < token.expires_at - token.created_at <= timedelta(days=7)


def test_a_changed_password_revokes_the_users_tokens_but_no_one_elses(researcher, admin_user, demo):
    mine, theirs = api_token_create(user=researcher), api_token_create(user=admin_user)
    researcher.last_login = timezone.now()
    researcher.save(update_fields=["last_login"])  # a login touches the user: the tokens stay
    researcher.first_name = "Rita"
    researcher.save()  # so does any save that keeps the password
    assert Client().get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {mine.secret}").status_code == 200
    researcher.set_password("a-new-Password-2")
    researcher.save()
    assert Client().get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {mine.secret}").status_code == 401
    assert not ApiToken.objects.filter(user=researcher).exists()
    assert Client().get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {theirs.secret}").status_code == 200


def test_the_admins_password_form_revokes_the_users_tokens(admin_client_, researcher):
    created = api_token_create(user=researcher)
    url = reverse("admin:auth_user_password_change", args=[researcher.pk])
    response = admin_client_.post(url, {"password1": "b-Fresh-Password-3", "password2": "b-Fresh-Password-3"})
    assert response.status_code == 302
    assert not ApiToken.objects.filter(pk=created.token.pk).exists()


def test_the_token_of_a_deactivated_user_is_refused(researcher, demo):
    created = api_token_create(user=researcher)
    researcher.is_active = False
    researcher.save()
    assert Client().get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {created.secret}").status_code == 401


def test_a_user_cannot_revoke_someone_elses_token(researcher_client, admin_user):
    theirs = api_token_create(user=admin_user).token
    response = researcher_client.post(reverse("account"), {"action": "revoke", "token": theirs.pk})
    assert response.status_code == 302
    assert ApiToken.objects.filter(pk=theirs.pk).exists()


@pytest.mark.parametrize(
    "header",
    [
        "Token " + "a" * 100_000,
        "Token h2e_\u00e9\u00e9",
        "Token",
        "Token a b",
        "Token \x00abc",
    ],
)
def test_hostile_token_headers_get_401_not_500(demo, header):
    response = Client().get("/api/procedures/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


@pytest.mark.parametrize(
    "data, field",
    [
        ({"action": "revoke", "token": "1e9"}, "token"),
        ({"action": "revoke", "token": "9" * 40}, "token"),
        ({"action": "revoke", "token": "١"}, "token"),  # an Arabic-Indic digit
        ({"action": "steal"}, "action"),
        ({"action": "create", "label": "x" * 101}, "label"),
        ({"action": "create", "label": "bad\x00label"}, "label"),
    ],
)
def test_bad_account_form_values_get_a_400_naming_the_field(researcher_client, researcher, data, field):
    response = researcher_client.post(reverse("account"), data)
    assert response.status_code == 400
    assert field in response.content.decode()
    assert not ApiToken.objects.filter(user=researcher).exists()


def test_the_admin_lists_tokens_by_prefix_only_and_cannot_create_one(admin_client_, researcher):
    created = api_token_create(user=researcher, label="notebook")
    listing = admin_client_.get("/admin/core/apitoken/").content.decode()
    assert created.token.prefix in listing and created.secret not in listing
    assert created.token.digest not in listing
    detail = admin_client_.get(f"/admin/core/apitoken/{created.token.pk}/change/").content.decode()
    assert created.secret not in detail and created.token.digest not in detail
    assert admin_client_.get("/admin/core/apitoken/add/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_old_plain_text_tokens_are_imported_hashed_and_their_table_dropped(researcher, demo):
    legacy_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute(
            'CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, created timestamp, user_id integer)'
        )
        cursor.execute(
            'INSERT INTO authtoken_token ("key", created, user_id) VALUES (%s, %s, %s)',
            [legacy_key, timezone.now(), researcher.pk],
        )
    migration = importlib.import_module("core.migrations.0002_api_tokens_from_authtoken")
    with connection.schema_editor() as editor:
        migration.import_legacy_tokens(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
    token = ApiToken.objects.get(user=researcher)
    assert token.digest == hashlib.sha256(legacy_key.encode()).hexdigest() and token.expires_at > timezone.now()
    assert Client().get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {legacy_key}").status_code == 200
