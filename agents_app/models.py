"""Apps as registered records, their service accounts and API keys, and their end users; and
what the agents' runtime keeps besides the session store (turn claims).

An ``App`` owns its agent's configuration (read at the start of every turn, so a change in the
console applies from the next turn) and says who may use it in the browser. A
``ServiceAccount`` belongs to one app and authenticates with ``ServiceAccountKey`` API keys
(djangorestframework-api-key: stored hashed, a visible prefix, expiry, revocation) that carry
scopes. An ``EndUser`` is a user of an app named by the app's own string id; it is a Django
account without a usable password, so that every guarantee of a signed-in user (isolation,
export, delete-all, provenance, audit) holds for it through the same code.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import RegexValidator
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey

from agents_app.runtime.agents import DEFAULT_INSTRUCTION, AgentConfig, CompactionConfig
from core.llm import PROVIDERS
from sessions_app.models import SessionRecord

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z"
NAME_MESSAGE = "1-128 letters, digits and . _ : @ -, starting with a letter or digit."
_COMPACTION = CompactionConfig()


class Scope(models.TextChoices):
    """What a service account's key may do."""

    SESSIONS_READ = "sessions:read", "Read sessions, events and state"
    SESSIONS_WRITE = "sessions:write", "Create, append to, rewind and delete sessions"
    MEMORY_READ = "memory:read", "Search memories and read generation jobs"
    MEMORY_WRITE = "memory:write", "Add, generate and delete memories"
    USERS_ADMIN = "users:admin", "List end users, export and delete all their data"


ALL_SCOPES = [scope.value for scope in Scope]


def _all_scopes() -> list[str]:
    return list(ALL_SCOPES)


def _default_tools() -> list[str]:
    """The built-in tools of the default agent (``AgentConfig.tools``)."""
    return list(AgentConfig.__dataclass_fields__["tools"].default)


class MemoryLifetime(models.TextChoices):
    """What a deleted session takes of the memories drawn from it."""

    FOLLOW_SOURCES = "follow_sources", "Memories follow their sources"
    OUTLIVE_SESSIONS = "outlive_sessions", "Memories outlive their sessions"


class App(models.Model):
    """An app: its agent's configuration and who may use it."""

    name = models.CharField(
        max_length=128,
        unique=True,
        validators=[RegexValidator(NAME_PATTERN, NAME_MESSAGE)],
        help_text="The app_name of its sessions and memories; cannot change once in use.",
    )
    title = models.CharField(max_length=200, blank=True, help_text="Shown in the chat's picker.")
    description = models.TextField(blank=True)
    open_to_all = models.BooleanField(
        default=True,
        help_text="Every signed-in user may use it; otherwise only members of the groups below.",
    )
    allowed_groups = models.ManyToManyField(Group, blank=True, related_name="apps")

    agent_name = models.CharField(max_length=128, default="assistant")
    provider = models.CharField(
        max_length=16,
        blank=True,
        choices=list(PROVIDERS.items()),
        help_text="Who runs the model; empty: the deployment's LLM_PROVIDER.",
    )
    model = models.CharField(
        max_length=128,
        blank=True,
        help_text="The provider's model, e.g. gemini-2.5-flash, or llama3.2 on Ollama; empty: "
        "the deployment's LLM_MODEL.",
    )
    instruction = models.TextField(
        default=DEFAULT_INSTRUCTION,
        help_text="The system instruction; {key} inserts a state value, {key?} inserts it or "
        "nothing, {app:key} and {user:key} read the shared scopes.",
    )
    tools = models.JSONField(
        default=_default_tools, blank=True, help_text="Names of built-in tools."
    )
    output_key = models.CharField(
        max_length=255, blank=True, help_text="State key that keeps the agent's final reply."
    )
    preload_memories = models.BooleanField(default=True)
    memory_tools = models.BooleanField(
        default=True, help_text="Offer the load_memory and create_memory tools."
    )
    max_steps = models.PositiveIntegerField(default=6)
    keep_last_invocations = models.PositiveIntegerField(default=_COMPACTION.keep_last_invocations)
    token_budget = models.PositiveIntegerField(default=_COMPACTION.token_budget)
    summarize_after_invocations = models.PositiveIntegerField(
        default=_COMPACTION.summarize_after_invocations
    )
    max_events_loaded = models.PositiveIntegerField(default=_COMPACTION.max_events_loaded)

    trigger_every_n_turns = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: MEMORY_TRIGGER_EVERY_N_TURNS; 0: never."
    )
    trigger_every_turn = models.BooleanField(
        null=True, blank=True, help_text="Empty: MEMORY_TRIGGER_EVERY_TURN."
    )
    trigger_session_idle_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: MEMORY_TRIGGER_SESSION_IDLE_SECONDS; 0: never."
    )
    trigger_session_left_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: MEMORY_TRIGGER_SESSION_LEFT_SECONDS; 0: never."
    )
    trigger_explicit = models.BooleanField(
        null=True, blank=True, help_text="Empty: MEMORY_TRIGGER_EXPLICIT."
    )
    pii_redaction = models.BooleanField(
        null=True,
        blank=True,
        help_text="Redact e-mail addresses, phone and card numbers and national ids from "
        "events before they are stored, and from memories. Empty: MEMORY_PII_REDACTION.",
    )
    memory_lifetime = models.CharField(
        max_length=32,
        choices=MemoryLifetime.choices,
        default=MemoryLifetime.FOLLOW_SOURCES,
        help_text="What a deleted session takes: the memories drawn only from it (the "
        "others derived again), or none.",
    )
    model_traits = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What was found of the model's server (Test connection, or a refusal on a "
        "turn): 'model' (provider:model it holds for), 'calls_tools', 'streams_tool_choice'.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def label(self) -> str:
        return self.title or self.name


class ServiceAccount(models.Model):
    """A backend of one app that calls the HTTP API for the app's end users."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="service_accounts")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["app", "name"], name="service_account_app_name")
        ]

    def __str__(self) -> str:
        return f"{self.app.name}/{self.name}"


class ServiceAccountKey(AbstractAPIKey):
    """An API key of a service account: hashed at rest, its prefix visible, optional expiry,
    revocable, with scopes and the time it was last used."""

    service_account = models.ForeignKey(
        ServiceAccount, on_delete=models.CASCADE, related_name="keys"
    )
    scopes = models.JSONField(default=_all_scopes)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API key"
        verbose_name_plural = "API keys"


class EndUser(models.Model):
    """A user of an app named by the app's own id, linked to a Django account.

    The account has no usable password and never signs in; the session store, memories, audit
    and data rights key on it as on any user. One account per (app, external id), so two apps'
    users with the same id are two people. A person's own account is linked to an app only by
    their approval of a superuser's proposal (``EndUserLinkProposal``).
    """

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="end_users")
    external_id = models.CharField(max_length=128)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="end_user"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["app", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["app", "external_id"], name="end_user_app_external_id")
        ]

    def __str__(self) -> str:
        return f"{self.app.name}:{self.external_id}"


class EndUserLinkProposal(models.Model):
    """A superuser's proposal to link a person's own account to an app's end user (the deploying
    site signs its users in with the same identity). Nothing is linked, and the app's keys
    reach nothing of the person, until the person approves it on their Settings page; they may
    decline it instead (issue 43)."""

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Waiting for the person"
        APPROVED = "approved", "Approved by the person"
        DECLINED = "declined", "Declined by the person"

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="link_proposals")
    external_id = models.CharField(max_length=128)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="end_user_proposals"
    )
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="end_user_proposals_made",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROPOSED)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.app.name}:{self.external_id} \u2192 {self.user} ({self.status})"


class ServiceRequest(models.Model):
    """One request of the service-account API and its outcome: the audit of service accounts.

    ``route`` is the URL pattern, not the path, so that no end user's id is kept here;
    ``end_user`` cascades, so deleting an end user's data deletes the requests made for them.
    """

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    app_name = models.CharField(max_length=128, blank=True)
    service_account = models.ForeignKey(
        ServiceAccount, on_delete=models.SET_NULL, null=True, blank=True, related_name="requests"
    )
    key_prefix = models.CharField(max_length=16, blank=True)
    method = models.CharField(max_length=8)
    route = models.CharField(max_length=200)
    status_code = models.PositiveSmallIntegerField()
    detail = models.CharField(max_length=300, blank=True)
    end_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="service_requests",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "service account request"

    def __str__(self) -> str:
        return f"{self.method} {self.route} {self.status_code}"


class TurnClaim(models.Model):
    """The right to run one chat turn, held by one process at a time: a lease with a fence.

    A row exists from just before a turn's user message is stored until its
    final event (reply, error or interruption) is; ``agents_app.chat.turn_claims``
    explains the protocol. ``fence`` grows each time another process takes
    the turn over, so a process that lost its claim can tell.
    """

    session = models.ForeignKey(SessionRecord, on_delete=models.CASCADE, related_name="turn_claims")
    user_event_id = models.CharField(max_length=128)
    holder = models.CharField(
        max_length=200, help_text="The process (host, pid) and socket running the turn."
    )
    fence = models.PositiveBigIntegerField(default=1)
    created_at = models.FloatField()
    renewed_at = models.FloatField(help_text="When the holder last renewed its lease (Unix time).")

    class Meta:
        verbose_name = "turn claim"
        constraints = [
            models.UniqueConstraint(
                fields=["session", "user_event_id"], name="turn_claim_session_user_event"
            ),
        ]
        indexes = [models.Index(fields=["renewed_at"], name="turn_claim_renewed")]

    def __str__(self) -> str:
        return f"{self.session_id}/{self.user_event_id} by {self.holder} (fence {self.fence})"
