"""The app policy the session store and memory ask (``sessions_app.app_policy``), answered
from the app records."""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from agents_app.models import App, MemoryLifetime
from agents_app.redaction import event_redact, filename_redact, value_redact
from agents_app.selectors import app_get, app_usable_by, apps_usable_by
from sessions_app.app_policy import AppSettings, settings_app_settings
from sessions_app.errors import AppForbiddenError, AppNotFoundError
from sessions_app.events import Event

# How long an app's settings read by this process answer the memory triggers run from the
# event loop after each turn.
ASYNC_SETTINGS_SECONDS = 5.0
TRIGGER_FIELDS = {
    "every_n_turns": "trigger_every_n_turns",
    "every_turn": "trigger_every_turn",
    "session_idle_seconds": "trigger_session_idle_seconds",
    "session_left_seconds": "trigger_session_left_seconds",
    "explicit": "trigger_explicit",
}


def app_settings_of(app: App) -> AppSettings:
    """The memory settings an app record holds; what it leaves empty comes from the
    deployment's settings for the app (``MEMORY_TRIGGERS``, ``MEMORY_PII_REDACTION``)."""
    deployment = settings_app_settings(app.name)
    triggers = dict(deployment.triggers)
    triggers.update(
        {
            key: getattr(app, field)
            for key, field in TRIGGER_FIELDS.items()
            if getattr(app, field) is not None
        }
    )
    pii = deployment.pii_redaction if app.pii_redaction is None else app.pii_redaction
    return AppSettings(
        pii_redaction=pii,
        triggers=triggers,
        memories_outlive_sessions=app.memory_lifetime == MemoryLifetime.OUTLIVE_SESSIONS,
    )


def apps_redaction_of(*, user: AbstractBaseUser | AnonymousUser) -> list[tuple[App, bool]]:
    """Each app ``user`` may chat in, with whether it redacts PII before anything is stored
    (the person's Settings page says so, app by app)."""
    return [(app, app_settings_of(app).pii_redaction) for app in apps_usable_by(user=user)]


class RegisteredAppPolicy:
    """Apps exist when registered; a signed-in user uses those open to all or to a group of
    theirs."""

    def __init__(self) -> None:
        self._recent: dict[str, tuple[float, AppSettings]] = {}

    def app_use_check(self, *, app_name: str, user: AbstractBaseUser | AnonymousUser) -> None:
        app = app_get(name=app_name)
        if app is None:
            raise AppNotFoundError(f"There is no app named {app_name!r}.")
        if not app_usable_by(app=app, user=user):
            raise AppForbiddenError(f"You may not use the app {app_name!r}.")

    def app_settings(self, *, app_name: str) -> AppSettings:
        app = app_get(name=app_name)
        found = settings_app_settings(app_name) if app is None else app_settings_of(app)
        self._recent[app_name] = (time.monotonic(), found)
        return found

    def recent_forget(self, *, app_name: str | None = None) -> None:
        """Drop what this process read of the app (of every app, for None): an app saved here
        applies at once here."""
        if app_name is None:
            self._recent.clear()
        else:
            self._recent.pop(app_name, None)

    async def app_settings_async(self, *, app_name: str) -> AppSettings:
        """What this process read of the app within ``ASYNC_SETTINGS_SECONDS`` (a change made
        in the console reaches the memory triggers of the turns of other processes that
        much later), else read through the database thread."""
        recent = self._recent.get(app_name)
        if recent is not None and time.monotonic() - recent[0] < ASYNC_SETTINGS_SECONDS:
            return recent[1]
        return await sync_to_async(self.app_settings)(app_name=app_name)

    def app_settings_all(self) -> dict[str, AppSettings]:
        return {app.name: app_settings_of(app) for app in App.objects.all()}

    def event_prepare(self, *, app_name: str, event: Event) -> None:
        if self.app_settings(app_name=app_name).pii_redaction:
            event_redact(event)

    def value_prepare(self, *, app_name: str, value: Any) -> Any:
        if self.app_settings(app_name=app_name).pii_redaction:
            return value_redact(value)
        return value

    def filename_prepare(self, *, app_name: str, filename: str) -> str:
        if self.app_settings(app_name=app_name).pii_redaction:
            return filename_redact(filename)
        return filename
