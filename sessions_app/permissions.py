"""Who owns sessions and events, the object permissions over them, and how the audit log names
a conversation to its user (registered with the access layer when the app starts)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.utils.text import Truncator

from access_app.models import AccessScope
from access_app.permissions import (
    object_rules_register,
    owner_or_staff_read,
    owner_or_staff_write,
    owner_resolver_register,
)
from access_app.selectors import AuditSubject, audit_subject_describer_register
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.selectors.sessions import session_chat_url


def sessions_describe(user: AbstractBaseUser, session_ids: set[str]) -> dict[str, AuditSubject]:
    """The user's own conversations among ``session_ids`` (their rows' keys, as the staff
    console names them), by title, linked to their chat page."""
    sessions = SessionRecord.objects.filter(user_id=user.pk, pk__in=session_ids).only(
        "key", "session_id", "app_name", "title"
    )
    return {
        session.pk: AuditSubject(
            f"the conversation “{Truncator(session.title or 'untitled').chars(60)}”",
            session_chat_url(session),
        )
        for session in sessions
    }


def session_permissions_register() -> None:
    owner_resolver_register(SessionRecord, lambda session: session.user_id)
    owner_resolver_register(EventRecord, lambda event: event.session.user_id)
    object_rules_register(
        {
            "sessions_app.view_sessionrecord": owner_or_staff_read(
                "sessions_app.view_sessionrecord", scope=AccessScope.CONVERSATIONS
            ),
            "sessions_app.view_eventrecord": owner_or_staff_read(
                "sessions_app.view_eventrecord", scope=AccessScope.CONVERSATIONS
            ),
            "sessions_app.change_sessionrecord": owner_or_staff_write(
                "sessions_app.change_sessionrecord"
            ),
            "sessions_app.delete_sessionrecord": owner_or_staff_write(
                "sessions_app.delete_sessionrecord"
            ),
        }
    )
    audit_subject_describer_register(SessionRecord, sessions_describe)
