"""The guard on every door that takes a password: lockouts (django-axes), their answer, their
audit entry, and the password confirmation of "delete all my data".

django-axes counts wrong passwords per account and per client address
(``SIGNIN_FAILURE_LIMIT`` each, within ``SIGNIN_LOCKOUT_MINUTES``) for every sign-in that goes
through ``django.contrib.auth.authenticate`` with its request: the sign-in form, the admin's
and HTTP Basic on the API. A locked account or address is refused before a password is hashed,
so guessing stops costing the server CPU too. The confirmation of a deletion checks a password
without signing in; it is counted the same way here, so it is no side door for a guesser who
holds a stolen session.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_cool_off
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings
from django.contrib.auth import get_user_model, user_login_failed
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from access_app.models import AuditAction, AuditLogEntry

logger = logging.getLogger(__name__)

GUARD_NAME = "sign-in guard"


def lockout_minutes() -> int:
    return settings.SIGNIN_LOCKOUT_MINUTES


def lockout_message() -> str:
    return (
        f"Too many wrong passwords for this account or from your address: signing in is "
        f"locked for {lockout_minutes()} minutes. Wait, then try again (or reset your password)."
    )


def signin_tries_left(*, request: HttpRequest, username: str) -> int:
    """How many more wrong passwords the sign-in guard takes for ``username`` from this client
    before it locks signing in (the fewer of the account's and the address's)."""
    failures = AxesProxyHandler.get_failures(request, {"username": username})
    return max(settings.SIGNIN_FAILURE_LIMIT - failures, 0)


def wrong_password_message(*, tries_left: int) -> str:
    """What a wrong username or password is told: how many tries are left and what follows."""
    lock = f"signing in is locked for {lockout_minutes()} minutes"
    if tries_left == 1:
        return (
            "Wrong username or password. One try left: after one more wrong password, "
            f"{lock} (you can reset your password instead)."
        )
    return f"Wrong username or password. {tries_left} tries left, then {lock}."


# The longest user name django-axes' records hold.
_RECORDED_USERNAME_CHARS = AccessAttempt._meta.get_field("username").max_length


def signin_username(request: HttpRequest, credentials: dict | None) -> str | None:
    """The user name django-axes counts a sign-in under (``AXES_USERNAME_CALLABLE``): the one
    given, cut to what its records hold. A longer one (no account has it) is then counted
    and locked out like any other, instead of failing the sign-in with a database error
    after its password was hashed."""
    field = settings.AXES_USERNAME_FORM_FIELD
    if credentials:
        username = credentials.get(field)
    else:
        username = getattr(request, "data", request.POST).get(field)
    return username[:_RECORDED_USERNAME_CHARS] if isinstance(username, str) else username


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """django-axes' answer to a locked sign-in: 429 with ``Retry-After``, JSON for the API
    (``{"detail", "code": "locked_out"}``), a page saying what happened elsewhere."""
    cool_off = get_cool_off(request)
    retry_after = str(math.ceil(cool_off.total_seconds())) if cool_off else None
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": lockout_message(), "code": "locked_out"}, status=429)
    else:
        response = render(
            request,
            "registration/locked_out.html",
            {"message": lockout_message(), "minutes": lockout_minutes()},
            status=429,
        )
    if retry_after:
        response["Retry-After"] = retry_after
    return response


def lockout_record(*, username: str | None, ip_address: str | None, door: str) -> None:
    """Log a lockout, and tell the account in its audit log (the access page lists it), with
    the address the wrong passwords came from: once per lockout, however long the guesser goes
    on knocking. An unknown username has no one to tell."""
    logger.warning(
        "sign-in locked", extra={"username": username, "ip_address": ip_address, "door": door}
    )
    if not username:
        return
    user = (
        get_user_model()
        ._default_manager.filter(**{get_user_model().USERNAME_FIELD: username})
        .first()
    )
    if user is None:
        return
    window_start = timezone.now() - timedelta(minutes=lockout_minutes())
    if AuditLogEntry.objects.filter(
        subject_user=user, action=AuditAction.LOCKOUT, created_at__gte=window_start
    ).exists():
        return
    AuditLogEntry.objects.create(
        actor=None,
        actor_username=GUARD_NAME,
        subject_user=user,
        action=AuditAction.LOCKOUT,
        object_type="auth.user",
        object_id=str(user.pk),
        reason=(
            f"{settings.SIGNIN_FAILURE_LIMIT} wrong passwords ({door}) from "
            f"{ip_address or 'an unknown address'}; signing in locked for "
            f"{lockout_minutes()} minutes."
        ),
        path=door[:500],
    )


def user_locked_out_receiver(
    sender, request=None, username=None, ip_address=None, **kwargs
) -> None:
    lockout_record(
        username=username, ip_address=ip_address, door=getattr(request, "path", "") or ""
    )


def password_confirm(*, request: HttpRequest, user, password: str) -> str | None:
    """Check the signed-in ``user``'s password for a sensitive action; None when right, else
    why not (wrong, or locked like a sign-in). Counts as a sign-in attempt of the account."""
    credentials = {get_user_model().USERNAME_FIELD: user.get_username()}
    if not AxesProxyHandler.is_allowed(request, credentials):
        return lockout_message()
    if user.check_password(password):
        return None
    user_login_failed.send(sender=__name__, credentials=credentials, request=request)
    if not AxesProxyHandler.is_allowed(request, credentials):
        return lockout_message()
    return "That is not your password."


def signin_records_delete(*, username: str) -> None:
    """Forget the failed sign-ins kept under ``username`` (its account is being deleted: the
    name is the person's, and no account is left to protect)."""
    AccessAttempt.objects.filter(username=username).delete()
    AccessFailureLog.objects.filter(username=username).delete()
    AccessLog.objects.filter(username=username).delete()
