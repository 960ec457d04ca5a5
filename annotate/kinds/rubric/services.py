"""Rubrics stored and registered: ``rubric_create`` checks a rubric (YAML, JSON or data),
stores it and registers its study kind; ``rubric_kinds_load`` is the registry's source of the
stored rubrics' kinds (annotate/kinds/__init__.py), so every process knows a rubric created
in another. The page, the API and ``manage.py rubric_create`` all call ``rubric_create``."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, IntegrityError, transaction

from annotate.kinds import kind_register, kind_unregister
from annotate.kinds.rubric.definition import kind_key, rubric_kind
from annotate.kinds.rubric.schema import RubricError, rubric_parse, rubric_text_load
from annotate.models import Rubric as RubricRow
from core.app_errors import InvalidInput

_LOADED: dict[str, int] = {}  # kind key -> the stored row's id it was built from


def _register(row: RubricRow) -> None:
    key = kind_key(row.key)
    kind_unregister(key)  # a rubric of the same key stored again (a database emptied by a test)
    kind_register(rubric_kind(rubric_parse(row.definition)))
    _LOADED[key] = row.pk


def rubric_kinds_load() -> None:
    """Register the kind of every stored rubric this process does not know yet. Quiet where
    the table cannot be read (before the migration, or where no database may be used)."""
    try:
        with transaction.atomic():
            stored = dict(RubricRow.objects.values_list("key", "pk"))
            missing = [key for key, pk in stored.items() if _LOADED.get(kind_key(key)) != pk]
            rows = list(RubricRow.objects.filter(key__in=missing)) if missing else []
    except (DatabaseError, RuntimeError):
        return
    for row in rows:
        try:
            _register(row)
        except RubricError:  # a stored definition always parses; one that does not stays out
            continue


def rubric_invalid(exc: RubricError) -> InvalidInput:
    """The refusal of a bad rubric, each problem under its path."""
    return InvalidInput(f"The rubric was not created: {exc}", exc.by_path(), code="rubric_invalid")


def rubric_create(*, source: str | bytes | dict[str, Any], name: str = "", created_by: Any = None) -> RubricRow:
    """Store a rubric (a file's text, or data already read) and register its kind
    ``rubric:<key>``. ``InvalidInput`` naming each problem's path, or ``key`` when a rubric of
    that key exists (a rubric is never changed: its studies' answers follow its questions)."""
    try:
        data = source if isinstance(source, dict) else rubric_text_load(source, name=name)
        rubric = rubric_parse(data)
    except RubricError as exc:
        raise rubric_invalid(exc) from None
    if RubricRow.objects.filter(key=rubric.key).exists():
        raise InvalidInput(
            fields={"key": f"a rubric with the key {rubric.key!r} exists; give the new rubric another key"},
            code="rubric_exists",
        )
    try:
        with transaction.atomic():
            row = RubricRow.objects.create(
                key=rubric.key,
                title=rubric.title,
                definition=rubric.as_dict(),
                created_by=created_by if getattr(created_by, "is_authenticated", False) else None,
            )
    except IntegrityError:
        raise InvalidInput(
            fields={"key": f"a rubric with the key {rubric.key!r} exists"}, code="rubric_exists"
        ) from None
    _register(row)
    return row


def rubric_list() -> list[RubricRow]:
    return list(RubricRow.objects.select_related("created_by").order_by("key"))


def rubric_kinds_forget() -> None:
    """Unregister every rubric kind this process registered (tests, after emptying the database)."""
    for key in list(_LOADED):
        kind_unregister(key)
    _LOADED.clear()
