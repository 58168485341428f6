"""Django's PostgreSQL backend with its psycopg pool (``DATABASE_POOL_MAX_SIZE``), and one
change: a connection found broken on checkout clears every idle connection of the pool at once.

The pool hands out an idle connection after a check (a round trip); when the check fails it
waits, a second, then two, before it tries the next idle one. After a PostgreSQL restart every
idle connection of a process is broken, so a request on a process that had several open ran out
of its wait (``DATABASE_POOL_TIMEOUT_SECONDS``) on them and answered 503 although the database
was back. Here the first broken one makes the pool check all of its idle connections at once
(``ConnectionPool.check``: the broken ones are dropped and replaced), and the request takes a
working one.
"""

from __future__ import annotations

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


class DatabaseWrapper(base.DatabaseWrapper):
    """Used with ``CONN_HEALTH_CHECKS`` off, so that the pool does not check on its own."""

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        if self.pool is None:
            return connection
        try:
            ConnectionPool.check_connection(connection)
        except psycopg.Error:
            self.pool.putconn(connection)
            self.pool.check()
            connection = super().get_new_connection(conn_params)
        return connection
