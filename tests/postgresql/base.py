"""The app's PostgreSQL backend (``core.postgresql``) for the tests' own connections: the same
but for how a transactional test's database is emptied after it.

Django empties every table after each transactional test (``flush``), on PostgreSQL with one
``TRUNCATE`` of all of them, which gives each table, index and TOAST table a new file and drops
the old: 230-330 ms a test for the app's 47 tables (271 relations), one and a half to two
minutes of the workers' time over the PostgreSQL pass's 375 transactional tests, where deleting
the few rows a test leaves takes 9 ms. ``flush`` runs its statements in one transaction and
Django's foreign keys on PostgreSQL are checked at commit (``DEFERRABLE INITIALLY DEFERRED``),
so the tables empty in any order. A flush that resets sequences, or cascades to tables outside
its list, is Django's ``TRUNCATE``.
"""

from __future__ import annotations

from core.postgresql import base


class DatabaseOperations(base.DatabaseWrapper.ops_class):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return super().sql_flush(
                style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        delete = style.SQL_KEYWORD("DELETE FROM")
        return [f"{delete} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
