"""Who may see a user's data besides the user: grants they gave, and the log of staff access.

``AccessGrant`` is an object-level permission a user gives one staff account
(read my memories until a date); ``AuditLogEntry`` records each time staff
viewed or changed a user's data, so that the user can see it. An entry holds
ids and kinds only, never the data itself, and goes with the user it is about.
Rows are written only through ``access_app.services``.
"""

from datetime import date, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from rest_framework_api_key.models import AbstractAPIKey


class AccessScope(models.TextChoices):
    """What a grant lets its holder read; every scope is read-only."""

    MEMORIES = "memories", "My memories and where they came from"
    CONVERSATIONS = "conversations", "My conversations"


REVIEWERS_GROUP = "Memory reviewers"
ADMINS_GROUP = "Memory admins"
KEY_MANAGERS_GROUP = "Key managers"
# The staff roles, each a group, by their short names (as `manage.py staff_user_create --role`
# takes them).
ROLES = {"reviewer": REVIEWERS_GROUP, "admin": ADMINS_GROUP, "keys": KEY_MANAGERS_GROUP}


class AuditAction(models.TextChoices):
    VIEW = "view", "Viewed"
    CHANGE = "change", "Changed"
    DELETE = "delete", "Deleted"
    INVALIDATE = "invalidate", "Invalidated"
    RESTORE = "restore", "Restored"
    APPROVE = "approve", "Approved"
    REJECT = "reject", "Rejected"
    RERUN = "rerun", "Re-ran memory generation"
    RETRY = "retry", "Retried a memory job"
    EXPORT = "export", "Exported"
    LOCKOUT = "lockout", "Locked signing in after wrong passwords"
    ADD = "add", "Added"
    SEARCH = "search", "Searched"
    REVOKE = "revoke", "Revoked"


class AuditLogEntry(models.Model):
    """One staff view or change of a user's data: who, what, when, why.

    ``actor_username`` survives the staff account's deletion; ``subject_user``
    cascades, so deleting a user's data also deletes what was logged about it.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="audit_entries_made",
    )
    actor_username = models.CharField(max_length=150)
    subject_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="audit_entries_about",
        help_text="Whose data it was; empty for an app's shared state.",
    )
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    object_type = models.CharField(
        max_length=100, help_text="app_label.model, e.g. memory_app.memory"
    )
    object_id = models.CharField(max_length=128, blank=True)
    reason = models.TextField(blank=True)
    path = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log entries"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["subject_user", "-created_at"], name="audit_subject_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_username} {self.action} {self.object_type} {self.object_id}"


class AccessGrant(models.Model):
    """A user lets one staff account read a scope of their data until ``expires_at``.

    A grant is active while it is neither revoked nor expired; it is never
    edited, only revoked, so the list a user sees is the history of grants.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_grants_given"
    )
    grantee = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_grants_received"
    )
    scope = models.CharField(max_length=32, choices=AccessScope.choices)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["grantee", "scope", "expires_at"], name="grant_grantee_active"),
            models.Index(fields=["owner", "-created_at"], name="grant_owner_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(expires_at__gt=models.F("created_at")),
                name="grant_expires_after_creation",
            ),
            models.CheckConstraint(
                condition=~models.Q(owner=models.F("grantee")),
                name="grant_not_to_oneself",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner_id} -> {self.grantee_id}: {self.scope} until {self.expires_at}"

    @property
    def last_day(self) -> date:
        """The last day the grant covers, in the current time zone: a grant "until 30 Nov"
        runs to the first instant of 1 Dec (``access_app.forms.end_of_day``), shown as 30 Nov."""
        return timezone.localtime(self.expires_at - timedelta(microseconds=1)).date()

    def is_active(self, *, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and self.expires_at > now


class AccountName(models.Model):
    """The confusables skeleton of an account's username, kept so that sign-up can refuse a
    name that looks like an existing one ("alice" with a Cyrillic a, "Iarry" for "larry")
    with one indexed lookup. Written by a signal whenever a user is saved, by any door."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="account_name",
    )
    skeleton = models.CharField(max_length=600, db_index=True)

    def __str__(self) -> str:
        return self.skeleton


class TokenScope(models.TextChoices):
    """What a personal access token lets an assistant do with its owner's memories."""

    READ = "read", "Read my memories"
    WRITE = "write", "Add, correct and delete my memories"


class PersonalAccessToken(AbstractAPIKey):
    """A token a person makes for their own assistant (an MCP client): hashed at rest as a
    service account's key is (djangorestframework-api-key), its prefix visible, read or
    read-write, optional expiry, revocable, with the time it was last used. It goes with the
    account (cascade)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    scopes = models.JSONField(default=list)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "personal access token"
        verbose_name_plural = "personal access tokens"

    @property
    def can_write(self) -> bool:
        return TokenScope.WRITE in self.scopes
