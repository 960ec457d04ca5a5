"""Lists answered by an ``APIView``: the view declares its filtering and paging as class
attributes, as a viewset does (``filter_backends``, ``filterset_class``, ``search_fields``,
``ordering_fields``, ``pagination_class``), so the OpenAPI schema documents the same query
parameters and the paged shape; ``list_response`` applies them to the selector's rows."""

from __future__ import annotations

import datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django_filters.fields import IsoDateTimeField
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView


class ApiPageNumberPagination(PageNumberPagination):
    """Every list's pages (``REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"]``): ``?page=N``, a whole
    number from 1, as the schema says; DRF's ``page=last`` and its empty ``page=`` (read as page 1)
    are not part of it: a 404, like any page that is not there."""

    last_page_strings = ()

    def get_page_number(self, request: Request, paginator: Any) -> Any:
        """The ``page`` sent, as sent (an empty one is no page, a 404); 1 when there is none."""
        number = request.query_params.get(self.page_query_param)
        return 1 if number is None else number


# An APIView answering a list: the project's default filter backends and pagination unless the
# view says otherwise (``pagination_class = None``: the whole list). No docstring, so that the
# schema describes each endpoint by its own view's docstring only.
class ListView(APIView):
    filter_backends: list[Any] = list(api_settings.DEFAULT_FILTER_BACKENDS)
    pagination_class: Any = api_settings.DEFAULT_PAGINATION_CLASS
    serializer_class: type[serializers.BaseSerializer[Any]]

    def rows(self) -> QuerySet[Any]:
        """The selector's rows, before the request's filters."""
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        """The rows (the filter backends and the schema's filter parameters read them)."""
        return self.rows()

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        """The rows' serializer (the ordering filter reads its fields when ``ordering_fields``
        is not set)."""
        return self.serializer_class

    def list_response(self, request: Request) -> Response:
        """``rows`` filtered by the view's backends (a bad filter value is a 400 naming the
        parameter), then one page of them serialized, or all of them without pagination."""
        serializer_class = self.get_serializer_class()
        rows = self.get_queryset()
        for backend in self.filter_backends:
            rows = backend().filter_queryset(request, rows, self)
        context = {"request": request, "view": self}
        if self.pagination_class is None:
            return Response(serializer_class(rows, many=True, context=context).data)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True, context=context).data)


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 instant, turned into UTC before it reaches a query: PostgreSQL takes UTC
    offsets up to 15:59 only (``+18:00`` was a 500 "time zone displacement out of range"), and
    an instant outside the years 1-9999 once in UTC is refused, naming the parameter. A parameter
    sent empty (``?created_before=``) is refused too: the schema calls it a date-time, and an
    empty one is no time at all (an absent parameter filters nothing, as before)."""

    default_error_messages = {
        "range": "must lie within the years 1-9999 once converted to UTC",
        "empty": "an ISO 8601 time (2026-01-31T00:00Z), not an empty value; leave the parameter out to filter nothing",
    }

    def clean(self, value: Any) -> datetime.datetime | None:
        if isinstance(value, str) and not value.strip():
            raise ValidationError(self.error_messages["empty"], code="empty")
        return super().clean(value)

    def to_python(self, value: Any) -> datetime.datetime | None:
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(datetime.UTC)
        except OverflowError:
            raise ValidationError(self.error_messages["range"], code="range") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    """The time filter of every API list (``created_after``, ``submitted_before``, ...)."""

    field_class = UtcIsoDateTimeField
