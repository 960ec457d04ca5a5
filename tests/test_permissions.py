"""Who sees what: anonymous users see only the login page (and, later, annotator entry
points); researchers see procedures, the API and its docs; admins also see the system
page and the Django admin."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from core.models import ApiToken
from core.services import api_token_create

# sqlite: every page and endpoint, so every view's queries also run on the embedded default
pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

RESEARCHER_PAGES = ["home", "procedure_list", "account", "api-docs"]
ADMIN_PAGES = ["system"]


@pytest.fixture
def procedure_url(demo):
    from mining.models import Procedure

    procedure = Procedure.objects.first()
    assert procedure is not None
    return reverse("procedure_detail", args=[procedure.pk])


@pytest.mark.parametrize("name", RESEARCHER_PAGES + ADMIN_PAGES)
def test_anonymous_user_is_sent_to_login_from_every_page(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_anonymous_user_sees_the_login_page(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_anonymous_user_gets_401_from_the_api(client, demo):
    for url in ("/api/procedures/", "/api/topics/", "/api/schema/"):
        response = client.get(url)
        assert response.status_code == 401, url
        assert response["WWW-Authenticate"].startswith("Token")


def test_anonymous_user_cannot_reach_the_django_admin(client):
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("name", RESEARCHER_PAGES)
def test_researcher_sees_researcher_pages(researcher_client, demo, name):
    assert researcher_client.get(reverse(name)).status_code == 200


def test_researcher_sees_a_procedure(researcher_client, procedure_url):
    assert researcher_client.get(procedure_url).status_code == 200


@pytest.mark.parametrize("name", ADMIN_PAGES)
def test_researcher_is_refused_admin_pages(researcher_client, name):
    response = researcher_client.get(reverse(name))
    assert response.status_code == 403
    assert b"does not have the role" in response.content


def test_researcher_is_refused_the_django_admin(researcher_client):
    response = researcher_client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_researcher_reads_the_api(researcher_client, demo):
    assert researcher_client.get("/api/procedures/").status_code == 200
    assert researcher_client.get("/api/schema/").status_code == 200


@pytest.mark.parametrize("name", RESEARCHER_PAGES + ADMIN_PAGES)
def test_admin_sees_every_page(admin_client_, demo, name):
    assert admin_client_.get(reverse(name)).status_code == 200


def test_admin_manages_users_in_the_django_admin(admin_client_):
    assert admin_client_.get("/admin/").status_code == 200
    assert admin_client_.get("/admin/auth/user/").status_code == 200
    assert admin_client_.get("/admin/mining/procedure/").status_code == 200


def test_logged_in_user_without_a_role_is_refused(db):
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user(username="nobody", password="x-Password-9")
    client = Client()
    client.force_login(nobody)
    assert client.get(reverse("home")).status_code == 403
    assert client.get("/api/procedures/").status_code == 403


def test_api_token_authenticates_without_a_session(researcher, demo):
    secret = api_token_create(user=researcher).secret
    client = Client()
    response = client.get("/api/procedures/", HTTP_AUTHORIZATION=f"Token {secret}")
    assert response.status_code == 200
    assert response.json()["count"] == 17


def test_wrong_token_is_refused(demo):
    response = Client().get("/api/procedures/", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert response.status_code == 401


def test_account_page_creates_a_token_and_revokes_it(researcher_client, researcher):
    researcher_client.post(reverse("account"), {"action": "create"})
    first = ApiToken.objects.get(user=researcher)
    researcher_client.post(reverse("account"), {"action": "create"})
    assert ApiToken.objects.filter(user=researcher).count() == 2
    researcher_client.post(reverse("account"), {"action": "revoke", "token": first.pk})
    assert ApiToken.objects.filter(user=researcher).count() == 1
    assert not ApiToken.objects.filter(pk=first.pk).exists()


def test_login_with_password_then_logout(researcher):
    client = Client()
    response = client.post(reverse("login"), {"username": "rita", "password": "rita-Password-1"})
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert client.get(reverse("home")).status_code == 200
    client.post(reverse("logout"))
    assert client.get(reverse("home")).status_code == 302
