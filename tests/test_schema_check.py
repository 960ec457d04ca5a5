"""The suite's schema check can fail (tests/schema_check.py): a response whose body the schema
refuses, a status the operation does not document, a method or path the schema does not have,
each fails the test that received it with the operation, the status and the first error; a
violation the test swallowed still fails it; and the schema checked is the one of the kinds
registered now.

The wrong answers come from views that exist in this module only (its URL configuration, the
project's with two more paths, is ``ROOT_URLCONF`` for the tests that use it) and from a real endpoint whose serializer is made to
lie."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.test import Client, override_settings
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.test import APIClient
from rest_framework.views import APIView

from config.urls import urlpatterns as project_urlpatterns
from tests import schema_check, toy_kind
from tests.schema_check import SchemaViolation


class CountSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    note = serializers.CharField(allow_null=True)


class CountView(APIView):
    """Answers what ``?answer=`` asks for: a body of the documented shape, or not."""

    permission_classes = [AllowAny]
    authentication_classes: list = []
    throttle_classes: list = []

    @extend_schema(responses={200: CountSerializer})
    def get(self, request):
        answer = request.query_params.get("answer", "right")
        if answer == "teapot":
            return Response({"code": "teapot", "detail": "I am a teapot"}, status=418)
        if answer == "wrong":
            return Response({"count": "three", "note": None})
        return Response({"count": 3, "note": None})


class HiddenView(APIView):
    """A view the schema leaves out, answering as if it were an operation."""

    permission_classes = [AllowAny]
    authentication_classes: list = []
    throttle_classes: list = []

    @extend_schema(exclude=True)
    def get(self, request):
        return Response({"count": 3})


urlpatterns = [
    path("api/counts/", CountView.as_view()),
    path("api/hidden/", HiddenView.as_view()),
    *project_urlpatterns,
]


@contextmanager
def violation(*parts: str) -> Iterator[None]:
    """The block receives a response that breaks the schema; the message names each of ``parts``.
    (Caught here, the violation is no longer the test's.)"""
    with pytest.raises(SchemaViolation) as caught:
        yield
    message = str(caught.value)
    for part in parts:
        assert part in message, message
    schema_check._unraised.remove(caught.value)


@override_settings(ROOT_URLCONF=__name__)
def test_a_body_the_schema_refuses_fails_naming_the_operation_status_and_place():
    client = Client()
    assert client.get("/api/counts/").json() == {"count": 3, "note": None}  # the right answer passes
    with violation("GET /api/counts/", "answered 200", "at /count", "three"):
        client.get("/api/counts/", {"answer": "wrong"})


@override_settings(ROOT_URLCONF=__name__)
def test_an_undocumented_status_fails_with_drfs_client_too():
    with violation("GET /api/counts/", "answered 418", "does not document"):
        APIClient().get("/api/counts/", {"answer": "teapot"})


@override_settings(ROOT_URLCONF=__name__)
def test_a_method_or_path_the_schema_does_not_have_must_be_refused_with_the_error_body():
    # A method the path does not have: DRF's 405 with the one error body passes.
    assert Client().post("/api/counts/").status_code == 405
    # A path the schema does not have: any answer but the API's 404 fails.
    with violation("GET /api/hidden/", "no operation", "answered 200"):
        Client().get("/api/hidden/")


@override_settings(ROOT_URLCONF=__name__)
def test_a_violation_the_test_swallowed_is_kept_for_the_end_of_the_test():
    try:
        Client().get("/api/counts/", {"answer": "wrong"})
    except Exception:  # noqa: BLE001 - what a careless test does
        pass
    assert len(schema_check._unraised) == 1  # pytest_runtest_call fails the test with it
    schema_check._unraised.clear()


@pytest.mark.django_db
def test_a_real_endpoint_whose_serializer_lies_fails(researcher_client, monkeypatch):
    from mining.apis import TopicSerializer
    from mining.models import Topic

    if not Topic.objects.exists():
        Topic.objects.create(name="Schema check", slug="schema-check")
    assert researcher_client.get("/api/topics/").status_code == 200
    assert researcher_client.get("/api/no-such-list/").status_code == 404  # the API's 404 passes
    represent = TopicSerializer.to_representation
    monkeypatch.setattr(
        TopicSerializer, "to_representation", lambda self, topic: {**represent(self, topic), "n_procedures": None}
    )
    with violation("GET /api/topics/", "answered 200", "at /0/n_procedures", "null"):
        researcher_client.get("/api/topics/")


@pytest.mark.django_db
def test_the_schema_checked_is_the_one_of_the_kinds_registered_now():
    from annotate.kinds import kind_register, kind_unregister

    def results_names() -> set[str]:
        report = schema_check.schema_now().raw["components"]["schemas"]["StudyReport"]
        return set(report["properties"])

    assert toy_kind.KIND.results_name not in results_names()
    kind_register(toy_kind.KIND)
    try:
        assert toy_kind.KIND.results_name in results_names()
    finally:
        kind_unregister(toy_kind.KEY)
    assert toy_kind.KIND.results_name not in results_names()
