"""Django's PostgreSQL backend (with its psycopg pool when ``DATABASE_POOL_MAX_SIZE`` is set),
and two changes, both about connections a database restart has ended:

- A connection found broken on the pool's checkout clears every idle connection of the pool at
  once. The pool hands out an idle connection after a check (a round trip); when the check
  fails it waits, a second, then two, before it tries the next idle one. After a PostgreSQL
  restart every idle connection of a process is broken, so a request on a process that had
  several open ran out of its wait (``DATABASE_POOL_TIMEOUT_SECONDS``) on them and answered
  503 although the database was back. Here the first broken one makes the pool check all of
  its idle connections at once (``ConnectionPool.check``: the broken ones are dropped and
  replaced), and the request takes a working one.
- A connection a thread keeps between queries (the database thread that ``sync_to_async``
  gives a process keeps one for as long as nothing closes it) is checked before each use, as
  Django checks a connection before it starts a cursor or a transaction: one the server has
  hung up on is closed, and the query opens a new one. Django's own check
  (``CONN_HEALTH_CHECKS``) runs only once per request and costs a round trip; this one costs
  a look at the socket, and finds a connection ended by a restart or ``pg_terminate_backend``
  (the server says so before it hangs up), which a chat turn otherwise met mid-turn, seconds
  after the database was back, and reported its reply lost.
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


def connection_hung_up(database_connection: psycopg.BaseConnection) -> bool:
    """Whether the server has closed, or is about to close, an idle connection.

    An idle connection in autocommit, listening to nothing, hears from the server only when
    the server is about to hang up (it sends its reason first, on a restart or a terminated
    backend), so a connection with anything to read is not used again: at worst a sound one
    is replaced.
    """
    if database_connection.closed:
        return True
    # poll, not select: a busy process has descriptors past select's limit of 1024.
    poller = select.poll()
    poller.register(database_connection.pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))


class DatabaseWrapper(base.DatabaseWrapper):
    """With a pool, used with ``CONN_HEALTH_CHECKS`` off, so that the pool does not check on
    its own."""

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

    def close_if_health_check_failed(self):
        """Close a kept connection the server has hung up on, before it is used; not inside a
        transaction, where a new connection would not carry the transaction on."""
        if (
            self.connection is not None
            and not self.in_atomic_block
            and connection_hung_up(self.connection)
        ):
            self.close()
            return
        super().close_if_health_check_failed()
