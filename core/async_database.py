"""The async session API's database work on PostgreSQL, straight from the event loop.

Django's database layer is synchronous: async code reaches it through
``sync_to_async``, whose thread-sensitive executor is one thread per process,
shared by every request and socket of that process. For the short reads of
the async session API (ADK's ``get_session`` and ``list_sessions``) handing
the work to that thread and back cost about as much as the query, and under
load a read queued behind whatever the thread was doing. So each event loop
keeps a few psycopg async connections of its own, opened with Django's
connection parameters (same database, same adapters), and a read's
statements go as one query, in autocommit. Each statement is prepared once
per connection and then only executed by name: the server does not parse it
again, and plans it again only while its plans depend on the parameters
(PostgreSQL's plan cache settles on one plan when that costs no more);
parsing and planning were a third of a short read.
Server-side prepared statements need each client connection to keep its
server connection: behind PgBouncer, use session pooling (docs/deploy.md).

Besides reads, only an append of an event comes this way, being one
statement in autocommit (``sessions_app.storage``); every other write keeps
Django's connections and transactions.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import psycopg
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection
from django.db import connections as django_connections
from django.db.utils import DatabaseErrorWrapper, load_backend
from psycopg.pq import TransactionStatus

from core.postgresql.base import connection_hung_up


class StoreRead(NamedTuple):
    """A read: its statements, and how their rows make the answer.

    The same read runs from sync code (``sessions_app.selectors.store_read_run``) or straight
    from an event loop (``store_read_async`` there, through this module). ``assemble``
    touches no database. A read with no statements answers without asking the database.
    Defined here, below every app, so that any app's selectors can describe a read.
    """

    statements: list[tuple[str, list[Any]]]
    assemble: Callable[[list[list[tuple]]], Any]


# A read of nothing, answering None: the part of a joined read that has nothing to ask (a user
# without an account's memory, a turn with no claim to release).
NOTHING_READ = StoreRead([], lambda results: None)


def store_reads_joined(*reads: StoreRead) -> StoreRead:
    """The ``reads`` as one read: their statements in order, so that from an event loop they
    go in one round trip, answering a tuple of their answers."""
    statements = [statement for read in reads for statement in read.statements]
    counts = [len(read.statements) for read in reads]

    def assemble(results: list[list[tuple]]) -> tuple:
        answers, start = [], 0
        for read, count in zip(reads, counts, strict=True):
            answers.append(read.assemble(results[start : start + count]))
            start += count
        return tuple(answers)

    return StoreRead(statements, assemble)


# Connections a loop opens at most, and keeps between reads: reads beyond that
# many at once wait for one, so that a burst of sockets cannot exhaust the
# server's max_connections.
CONNECTIONS_PER_LOOP = 4
# How these connections show in pg_stat_activity.
APPLICATION_NAME = "chatapp-async"
# Statements a connection keeps prepared before it is replaced by a fresh one: each
# distinct statement (an append's shape by its numbers of keys, a count of recent
# events) holds server memory for as long as the connection lives.
PREPARED_PER_CONNECTION = 200


class _PsycopgConnections:
    """What Django's ``DatabaseErrorWrapper`` reads of a connection wrapper, for connections
    that are not Django's: the driver's exceptions, and a flag nothing here reads."""

    Database = psycopg
    errors_occurred = False


# psycopg's errors raised as Django's (``django.db.OperationalError``...), as from Django's
# connection, without making a Django connection wrapper in each request's context to do it.
_as_django_errors = DatabaseErrorWrapper(_PsycopgConnections())


def available() -> bool:
    """Whether async code can reach the database directly (PostgreSQL only).

    Told by the configured backend, not by ``connection``: each request's context would make
    a connection wrapper of its own just to be asked (about 15 microseconds, several times a
    request on the service API's path)."""
    return _backend_vendor(django_connections.settings[DEFAULT_DB_ALIAS]["ENGINE"]) == "postgresql"


@functools.cache
def _backend_vendor(engine: str) -> str:
    return load_backend(engine).DatabaseWrapper.vendor


class _LoopConnections:
    """The idle connections of one event loop, reused read after read."""

    def __init__(self, parameters: dict[str, Any]) -> None:
        self.parameters = parameters
        self.idle: list[psycopg.AsyncConnection] = []
        self.slots = asyncio.Semaphore(CONNECTIONS_PER_LOOP)

    async def take(self) -> tuple[psycopg.AsyncConnection, bool]:
        """A connection, and whether it was opened just now (a reused one may have broken).

        Waits while ``CONNECTIONS_PER_LOOP`` are in use; pair with ``give_back``.
        """
        await self.slots.acquire()
        try:
            while self.idle:
                reused = self.idle.pop()
                if _quiet(reused):
                    return reused, False
                await reused.close()
            return await psycopg.AsyncConnection.connect(**self.parameters), True
        except BaseException:
            self.slots.release()
            raise

    async def give_back(self, database_connection: psycopg.AsyncConnection) -> None:
        try:
            if (
                database_connection.closed
                or database_connection.info.transaction_status != TransactionStatus.IDLE
                or len(_prepared_on.get(database_connection, ())) >= PREPARED_PER_CONNECTION
            ):
                await database_connection.close()
            else:
                self.idle.append(database_connection)
        finally:
            self.slots.release()


def _quiet(database_connection: psycopg.AsyncConnection) -> bool:
    """Whether an idle connection is still open and has nothing to say (so that a write never
    goes out on one the server is hanging up on)."""
    return not connection_hung_up(database_connection)


def _connections_close(idle: list[psycopg.AsyncConnection]) -> None:
    """Close the idle connections of a loop that is gone (no loop left to await on)."""
    for database_connection in idle:
        database_connection.pgconn.finish()
    idle.clear()


def _closed_loops_forget() -> None:
    """Close the kept connections of loops that have closed since (a test's, an
    ``asyncio.run``'s): a closed loop may be collected long after, and its connections
    would count against the server's max_connections until then."""
    for loop, connections in list(_by_loop.items()):
        if loop.is_closed():
            _connections_close(connections.idle)
            _by_loop.pop(loop, None)


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopConnections] = (
    weakref.WeakKeyDictionary()
)


def _loop_connections() -> _LoopConnections:
    loop = asyncio.get_running_loop()
    connections = _by_loop.get(loop)
    if connections is None:
        _closed_loops_forget()
        parameters = connection.get_connection_params()
        parameters.update(
            autocommit=True,
            cursor_factory=psycopg.AsyncClientCursor,
            application_name=APPLICATION_NAME,
        )
        connections = _by_loop[loop] = _LoopConnections(parameters)
        weakref.finalize(loop, _connections_close, connections.idle)
    return connections


_statement_numbers = itertools.count(1)
_statement_names: dict[str, str] = {}
_prepared_on: weakref.WeakKeyDictionary[psycopg.AsyncConnection, set[str]] = (
    weakref.WeakKeyDictionary()
)


def _statement_name(sql: str) -> str:
    name = _statement_names.get(sql)
    if name is None:
        name = _statement_names.setdefault(sql, f"chatapp_{next(_statement_numbers)}")
    return name


def _placeholders_numbered(sql: str) -> str:
    """``sql`` with its ``%s`` placeholders as ``$1``, ``$2``, ..., for PREPARE."""
    pieces = sql.split("%s")
    if any("%" in piece for piece in pieces):
        raise ValueError("A prepared statement may hold no '%' but its placeholders.")
    numbered = [f"{piece}${number}" for number, piece in enumerate(pieces[:-1], 1)]
    return "".join(numbered) + pieces[-1]


def _execute_sql(name: str, params: list[Any]) -> str:
    if not params:
        return f"EXECUTE {name}"
    return f"EXECUTE {name}({', '.join(['%s'] * len(params))})"


async def _rows_of_each(
    database_connection: psycopg.AsyncConnection, statements: Sequence[tuple[str, list[Any]]]
) -> list[list[tuple]]:
    """The rows of each statement, prepared on this connection first if need be.

    A connection on which a statement failed for any reason but a broken
    constraint or a broken connection is closed: what it has prepared may no
    longer match the server (a PREPARE half done, a plan that a migration
    invalidated).
    """
    try:
        return await _prepared_rows_of_each(database_connection, statements)
    except (psycopg.IntegrityError, psycopg.OperationalError):
        raise
    except psycopg.Error:
        await database_connection.close()
        raise


async def _prepared_rows_of_each(
    database_connection: psycopg.AsyncConnection, statements: Sequence[tuple[str, list[Any]]]
) -> list[list[tuple]]:
    prepared = _prepared_on.setdefault(database_connection, set())
    names = [_statement_name(sql) for sql, _ in statements]
    async with database_connection.cursor() as cursor:
        unprepared = {
            name: sql
            for name, (sql, _) in zip(names, statements, strict=True)
            if name not in prepared
        }
        if unprepared:
            await cursor.execute(
                "; ".join(
                    f"PREPARE {name} AS {_placeholders_numbered(sql)}"
                    for name, sql in unprepared.items()
                )
            )
            prepared.update(unprepared)
        await cursor.execute(
            "; ".join(
                _execute_sql(name, params)
                for name, (_, params) in zip(names, statements, strict=True)
            ),
            [param for _, params in statements for param in params],
        )
        results = [await cursor.fetchall()]
        while cursor.nextset():
            results.append(await cursor.fetchall())
        return results


async def fetch_each(
    statements: Sequence[tuple[str, list[Any]]], *, repeatable: bool = True
) -> list[list[tuple]]:
    """The rows of each statement, in order, in one round trip from this event loop (two
    the first time a connection meets one of the statements, to prepare it).

    Errors are Django's (``django.db.OperationalError`` when the database is
    unreachable), as from Django's connection. A kept connection found broken
    (the server restarted since the last call) is replaced once, if the
    statements are ``repeatable``: a write is not, as it may have been
    committed before the connection broke.
    """
    connections = _loop_connections()
    while True:
        with _as_django_errors:
            database_connection, fresh = await connections.take()
        try:
            with _as_django_errors:
                return await _rows_of_each(database_connection, statements)
        except OperationalError:
            if fresh or not repeatable or not database_connection.broken:
                raise
        finally:
            await connections.give_back(database_connection)
