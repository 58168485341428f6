"""What the service-account API verified lately, kept in this process for a few seconds.

Every request of the API names its key and, mostly, an end user. Looking both up is two
statements that would otherwise be a third of a session append's time. So a verified key
(looked up by prefix and its SHA-512 compared, as ``djangorestframework-api-key`` does) is kept
by the digest of the presented key, never the key itself, for ``SERVICE_KEY_CACHE_SECONDS``;
an unknown, malformed or wrong key is never kept, so guessing gains nothing. Revoking a key
forgets it at once in the process that revokes it; every other process refuses it within
``SERVICE_KEY_CACHE_SECONDS``. Expiry is checked on the kept key at every request.

An end user's account id is kept by (app, id) for as long. Account ids are never reused, so a
kept id can only be stale by naming an account that is gone: the caller then finds no session,
forgets it (``end_user_forget``) and looks again.
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings

from agents_app.models import ServiceAccountKey

_keys: dict[str, tuple[float, ServiceAccountKey]] = {}
_end_users: dict[tuple[int, str], tuple[float, int, str]] = {}


def key_digest(key: str) -> str:
    """The digest a key is kept by: the hex SHA-512 its stored hash also ends with."""
    return hashlib.sha512(key.encode()).hexdigest()


def key_kept(*, digest: str) -> ServiceAccountKey | None:
    """The key verified for ``digest`` in the last ``SERVICE_KEY_CACHE_SECONDS``, if any."""
    entry = _keys.get(digest)
    if entry is None:
        return None
    if entry[0] < time.monotonic():
        _keys.pop(digest, None)
        return None
    return entry[1]


def key_keep(*, digest: str, key: ServiceAccountKey) -> None:
    """Keep ``key``, just verified for ``digest`` (a revoked one is not kept)."""
    seconds = settings.SERVICE_KEY_CACHE_SECONDS
    if seconds > 0 and not key.revoked:
        _keys[digest] = (time.monotonic() + seconds, key)


def key_forget(*, hashed_key: str) -> None:
    """Forget the key stored with ``hashed_key`` (``sha512$$<digest>``), as on revocation."""
    _keys.pop(hashed_key.rpartition("$")[2], None)


def end_user_kept(*, app_pk: int, external_id: str) -> tuple[int, str] | None:
    """The kept (account id, account username) of the end user, None when not kept."""
    entry = _end_users.get((app_pk, external_id))
    if entry is None:
        return None
    if entry[0] < time.monotonic():
        _end_users.pop((app_pk, external_id), None)
        return None
    return entry[1], entry[2]


def end_user_keep(*, app_pk: int, external_id: str, user_pk: int, username: str = "") -> None:
    seconds = settings.SERVICE_KEY_CACHE_SECONDS
    if seconds > 0:
        _end_users[(app_pk, external_id)] = (time.monotonic() + seconds, user_pk, username)


def end_user_forget(*, app_pk: int, external_id: str) -> None:
    _end_users.pop((app_pk, external_id), None)


def forget_all() -> None:
    """Forget every key and end user (tests start each from nothing)."""
    _keys.clear()
    _end_users.clear()
