"""How a process tells that a backing service is out of reach, and what it says to users then.

Redis carries the channel layer, the cache and the Celery broker, and holds nothing the
database does not: while it is away the app goes on with the database alone (no pushed
notices, rate limits and search caches off, memory jobs left queued for the sweeper).
PostgreSQL holds the data: while it is away a request fails with a clear 503 (an ``error``
frame on the chat socket) instead of a traceback, and the next request after it is back
succeeds, as connections are health-checked (``CONN_HEALTH_CHECKS``) and replaced.
"""

from __future__ import annotations

from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import RedisError

# Raised by Django's Redis cache and by channels-redis when Redis cannot be reached.
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, OSError)
# Raised by Celery's apply_async when the broker cannot take the message.
BROKER_ERRORS: tuple[type[Exception], ...] = (BrokerOperationalError, RedisError, OSError)
# Raised by the ORM when the database server cannot be reached or dropped the connection
# (not IntegrityError and the like, which are the request's own fault).
DATABASE_UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)

DATABASE_UNAVAILABLE_CODE = "database_unavailable"
DATABASE_UNAVAILABLE_MESSAGE = "The database is unavailable right now; try again in a moment."
SOCKET_REFUSED = "The database is unavailable right now; reconnect in a moment."
# Close code of a chat socket refused because the database is unreachable: 4000 + the HTTP
# status, as 4401 and 4404 (the server may only send 1000 or 3000-4999, so not 1013).
CLOSE_DATABASE_UNAVAILABLE = 4503
# Seconds a client is asked to wait before trying again.
RETRY_AFTER_SECONDS = 5
