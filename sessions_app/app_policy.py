"""What the session store and long-term memory need to know about an app, answered from above.

Apps are registered records of ``agents_app``, a layer above this one; it registers its
policy here when it starts (as the runner's memory provider is registered), so that the doors
of this app can refuse a session in an app that does not exist or that the caller may not use,
and so that memory reads each app's triggers and PII redaction. Without a registered policy
every app name is open and the deployment's settings apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from sessions_app.errors import AppForbiddenError, AppNotFoundError  # noqa: F401  (raised)
from sessions_app.events import Event


@dataclass(frozen=True)
class AppSettings:
    """An app's memory settings: ``pii_redaction`` of events and memories, its memory
    ``triggers`` (keys of ``MEMORY_TRIGGERS``, those left out take the deployment's value), and
    whether its memories outlive a deleted session (``memories_outlive_sessions``; otherwise
    they follow their sources)."""

    pii_redaction: bool = False
    triggers: dict[str, Any] = field(default_factory=dict)
    memories_outlive_sessions: bool = False


class AppPolicy(Protocol):
    def app_use_check(self, *, app_name: str, user: AbstractBaseUser | AnonymousUser) -> None:
        """Raise ``AppNotFoundError`` or ``AppForbiddenError`` unless ``user`` may start a
        session in ``app_name``."""
        ...

    def app_settings(self, *, app_name: str) -> AppSettings: ...

    async def app_settings_async(self, *, app_name: str) -> AppSettings:
        """``app_settings`` from an event loop (after every turn): may answer from what this
        process read a few seconds ago, so it rarely takes the database thread."""
        ...

    def app_settings_all(self) -> dict[str, AppSettings]:
        """The settings of every app that has some of its own (for the periodic scans)."""
        ...

    def event_prepare(self, *, app_name: str, event: Event) -> None:
        """Make ``event`` what the app lets be stored (its PII redaction), in place."""
        ...

    def value_prepare(self, *, app_name: str, value: Any) -> Any:
        """``value`` as the app lets it be stored (its PII redaction): a session's title or
        initial state, every string at any depth of its lists and dicts; keys stay."""
        ...

    def filename_prepare(self, *, app_name: str, filename: str) -> str:
        """An artifact's ``filename`` as the app lets it be stored and looked up (its PII
        redaction), its ``user:`` prefix and extension kept."""
        ...


def settings_app_settings(app_name: str) -> AppSettings:
    """The deployment's settings for an app: ``MEMORY_PII_REDACTION`` and ``MEMORY_TRIGGERS``."""
    return AppSettings(
        pii_redaction=bool(settings.MEMORY_PII_REDACTION.get(app_name, False)),
        triggers=dict(settings.MEMORY_TRIGGERS.get(app_name, {})),
    )


class OpenAppPolicy:
    """Every app name open to every signed-in user; settings from the deployment's."""

    def app_use_check(self, *, app_name: str, user: AbstractBaseUser | AnonymousUser) -> None:
        return None

    def app_settings(self, *, app_name: str) -> AppSettings:
        return settings_app_settings(app_name)

    async def app_settings_async(self, *, app_name: str) -> AppSettings:
        return settings_app_settings(app_name)

    def app_settings_all(self) -> dict[str, AppSettings]:
        names = {*settings.MEMORY_PII_REDACTION, *settings.MEMORY_TRIGGERS}
        return {name: settings_app_settings(name) for name in names}

    def event_prepare(self, *, app_name: str, event: Event) -> None:
        return None

    def value_prepare(self, *, app_name: str, value: Any) -> Any:
        return value

    def filename_prepare(self, *, app_name: str, filename: str) -> str:
        return filename


_policy: AppPolicy = OpenAppPolicy()


def app_policy_register(policy: AppPolicy) -> None:
    global _policy
    _policy = policy


def app_policy_get() -> AppPolicy:
    return _policy
