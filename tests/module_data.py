"""Data built once for the tests of one module (on one pytest-xdist worker), for fixtures whose
building costs seconds and which every test of the module only reads or changes in passing.

``module_transaction`` opens a transaction the data is built in and rolls it back when the
module's tests are done. Each test runs in a savepoint of it (pytest-django's ``db``), so what a
test changes is gone before the next one starts, as with data built for each test; a fixture
that hands out a model instance should read it again for each test, since an instance a test
changed in memory keeps its changes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction


@contextmanager
def module_transaction(django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
