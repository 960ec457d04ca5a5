"""The test suite's PostgreSQL backend: Django's own, with a transactional test's flush made of
``DELETE`` statements instead of one ``TRUNCATE``.

A transactional test (``transactional_db``, the live server, the worker tests) empties every
table when it ends. PostgreSQL's ``TRUNCATE`` gives each of the ~70 tables a new file, which
took 0.6-1.3 s a flush on this machine; deleting the few rows a test leaves took 0.03-0.07 s
(measured on the migrated test database, 3 flushes each). The deletes run in the flush's one
transaction, and Django's foreign keys are deferred to its commit, so their order does not
matter. A flush that must also reset sequences or cascade into tables outside the test's
apps keeps Django's ``TRUNCATE``. Everything else is PostgreSQL as the product runs it."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(
        self, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        if reset_sequences or allow_cascade or not tables:
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
