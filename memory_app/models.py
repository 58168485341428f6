"""Long-term memory: facts about a user (or an app, or one session) with provenance.

Every memory knows where it came from (``MemorySource``: the events it was
derived from, with the quoted excerpt), how it changed (``MemoryRevision``:
before, after, why, by which job or person) and which job made it
(``GenerationJob``). Rows are written only through ``memory_app.services``.
"""

import uuid

from django.conf import settings
from django.db import models

from sessions_app.models import ArtifactRecord, EventRecord, SessionRecord


class SourceType(models.TextChoices):
    """Where a fact came from; the order is the trust order used to settle conflicts."""

    BOOTSTRAPPED = "bootstrapped", "Bootstrapped"
    EXPLICIT = "explicit", "Explicit user statement"
    IMPLICIT = "implicit", "Implicit from conversation"
    TOOL = "tool", "Tool output"


TRUST = {
    SourceType.BOOTSTRAPPED: 4,
    SourceType.EXPLICIT: 3,
    SourceType.IMPLICIT: 2,
    SourceType.TOOL: 1,
}
# What the person said, asked to remember or not: between two of these the newer wins, whatever
# their place in TRUST, which only keeps a lower-trust source from overriding the person.
PERSON_SOURCES = frozenset([SourceType.EXPLICIT, SourceType.IMPLICIT])


class MemoryScope(models.TextChoices):
    USER = "user", "User"
    SESSION = "session", "Session"
    APP = "app", "App"


class MemoryStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    QUARANTINED = "quarantined", "Quarantined for review"
    INVALIDATED = "invalidated", "Invalidated"
    REJECTED = "rejected", "Rejected in review"
    # A record of what was said that earlier versions kept as a memory (a whole turn): out of
    # the Memory page and recall, kept with its sources and revisions for the audit.
    RETIRED = "retired", "Retired: a record of what was said, not a memory"


# What each status means to the person whose memory it is: the Memory page and the chat say it
# in the same words.
HELD_FOR_REVIEW_NOTE = "Held for review: not used in replies."
MEMORY_STATUS_NOTES = {
    MemoryStatus.QUARANTINED: HELD_FOR_REVIEW_NOTE,
    MemoryStatus.INVALIDATED: "No longer used: replaced or outdated.",
    MemoryStatus.REJECTED: "Rejected in review: not used in replies.",
}


class MemoryTopic(models.Model):
    """A kind of fact an app wants remembered; guides extraction.

    Managed topics exist for every app; custom ones are an app's own, with a
    description and few-shot examples (``[{"text": ..., "memory": ...}]``).
    """

    app_name = models.CharField(max_length=128)
    key = models.SlugField(max_length=64)
    label = models.CharField(max_length=128)
    description = models.TextField()
    few_shot_examples = models.JSONField(default=list, blank=True)
    managed = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    ttl_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Days until its new memories are forgotten (empty: the app's default).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["app_name", "key"], name="memory_topic_app_key"),
        ]

    def __str__(self) -> str:
        return f"{self.app_name}: {self.label}"


class MemorySettings(models.Model):
    """A user's choices: whether chats create memories, whether replies use them, and whether
    replies may search the user's past chats (only while memories are used)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_settings"
    )
    create_enabled = models.BooleanField(default=True)
    use_enabled = models.BooleanField(default=True)
    past_chats_enabled = models.BooleanField(
        default=True, help_text="Reference past chats: replies may search what the user said."
    )
    # Replaced (by a random number, never 0) in the transaction of every write to the user's
    # memories. 0: no memory of the user's was ever written, so there is none to search.
    index_version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"memory settings of {self.user_id}"


class AppIndexVersion(models.Model):
    """The version of an app's shared (app-scope) memories, replaced in the transaction of
    every write to them, as ``MemorySettings.index_version`` is for a user's: what a process
    keeps of them (the app's guidance) is current while it was read at this version."""

    app_name = models.CharField(max_length=128, unique=True)
    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"index version {self.version} of app {self.app_name}"


class GenerationJob(models.Model):
    """One run of the extract-consolidate-store pipeline over a range of a session's events."""

    class Trigger(models.TextChoices):
        SESSION_END = "session_end", "Session ended"
        SESSION_IDLE = "session_idle", "Session idle"
        SESSION_LEFT = "session_left", "Session left"
        EVERY_N_TURNS = "every_n_turns", "Every N turns"
        EVERY_TURN = "every_turn", "Every turn"
        EXPLICIT = "explicit", "Explicit 'remember'"
        TOOL = "tool", "create_memory tool"
        MANUAL = "manual", "Re-run by staff"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"
        DEAD = "dead", "Dead"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_jobs"
    )
    app_name = models.CharField(max_length=128)
    session = models.ForeignKey(
        SessionRecord, on_delete=models.SET_NULL, null=True, blank=True, related_name="memory_jobs"
    )
    trigger = models.CharField(max_length=32, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    first_sequence = models.PositiveBigIntegerField(null=True, blank=True)
    last_sequence = models.PositiveBigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a job waiting after a transient failure (its model server down or "
        "busy) is tried next; empty once it runs again.",
    )

    class Meta:
        indexes = [
            models.Index(fields=["status", "created_at"], name="memory_job_status"),
            models.Index(fields=["user", "status"], name="memory_job_user_status"),
        ]

    def __str__(self) -> str:
        return f"{self.trigger} job {self.id} ({self.status})"


class MemoryWatermark(models.Model):
    """The last event sequence of a session already processed into memories."""

    session = models.OneToOneField(
        SessionRecord, on_delete=models.CASCADE, primary_key=True, related_name="memory_watermark"
    )
    last_sequence = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.session_id} up to #{self.last_sequence}"


class SessionDeparture(models.Model):
    """The user left a session at ``left_at``: its last chat socket closed, or they opened
    another chat. Unless they come back (which deletes the row), the session's unprocessed
    turns are generated once the app's quiet period has passed."""

    session = models.OneToOneField(
        SessionRecord, on_delete=models.CASCADE, primary_key=True, related_name="memory_departure"
    )
    left_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.session_id} left at {self.left_at:%Y-%m-%d %H:%M:%S}"


class RewindRelease(models.Model):
    """The session was rewound (an edited message, a regenerated reply) and the memories of the
    turns it took out of the history are still to be revised: written with the rewind, deleted
    once the revision ran, so a revision whose task was never enqueued (the broker down) is
    found and run by the periodic sweep. ``rewinds`` counts the rewinds since the last
    revision, so one that lands while a revision runs keeps the row for the next."""

    session = models.OneToOneField(
        SessionRecord, on_delete=models.CASCADE, primary_key=True, related_name="rewind_release"
    )
    rewound_at = models.DateTimeField(db_index=True)
    rewinds = models.PositiveIntegerField(default=1)

    def __str__(self) -> str:
        return f"{self.session_id} rewound at {self.rewound_at:%Y-%m-%d %H:%M:%S}"


class MemoryRederivation(models.Model):
    """The memory lost some of its sources (a chat deleted, a turn rewound, a file removed, a
    session expired) and is to be derived again from those it keeps: written in the
    transaction that took the sources away, deleted once the derivation ran, so one whose task
    was lost is found and run by the periodic sweep. ``cause`` says, for the person, what took
    the sources away ("after you deleted the chat “Trip”"); ``requests`` counts the requests
    since the last derivation, so one that lands while a derivation runs keeps the row."""

    memory = models.OneToOneField(
        "Memory", on_delete=models.CASCADE, primary_key=True, related_name="rederivation"
    )
    cause = models.TextField()
    requested_at = models.DateTimeField(db_index=True)
    requests = models.PositiveIntegerField(default=1)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.memory_id} to derive again {self.cause}"


class Memory(models.Model):
    """One atomic fact. ``user`` owns user- and session-scope memories; app-scope ones have none."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    app_name = models.CharField(max_length=128)
    scope = models.CharField(max_length=16, choices=MemoryScope.choices, default=MemoryScope.USER)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="memories",
    )
    session = models.ForeignKey(
        SessionRecord,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="session_memories",
        help_text="Set for session-scope memories only.",
    )
    topic = models.CharField(max_length=64, blank=True)
    text = models.TextField()
    structured = models.JSONField(null=True, blank=True)
    source_type = models.CharField(max_length=16, choices=SourceType.choices)
    confidence = models.FloatField(default=0.7)
    importance = models.FloatField(default=0.5)
    status = models.CharField(
        max_length=16, choices=MemoryStatus.choices, default=MemoryStatus.ACTIVE
    )
    review_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=128, blank=True)
    job = models.ForeignKey(
        GenerationJob,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memories",
    )
    image = models.ForeignKey(
        ArtifactRecord,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="held_by_memories",
        help_text="The file this memory keeps: the user's own copy (a user: artifact).",
    )

    class Meta:
        verbose_name_plural = "memories"
        permissions = [("review_quarantine", "Can approve or reject quarantined memories")]
        indexes = [
            models.Index(
                fields=["user", "app_name", "status", "-updated_at"], name="memory_owner_recent"
            ),
            models.Index(
                fields=["user", "app_name", "status", "-importance"], name="memory_owner_important"
            ),
            models.Index(fields=["app_name", "scope", "status"], name="memory_app_scope"),
            models.Index(fields=["expires_at"], name="memory_expiry"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1),
                name="memory_confidence_range",
            ),
            models.CheckConstraint(
                condition=models.Q(importance__gte=0, importance__lte=1),
                name="memory_importance_range",
            ),
            models.CheckConstraint(
                condition=~models.Q(scope="session") | models.Q(session__isnull=False),
                name="memory_session_scope_has_session",
            ),
            models.CheckConstraint(
                condition=models.Q(scope="app") | models.Q(user__isnull=False),
                name="memory_private_scope_has_owner",
            ),
        ]

    def __str__(self) -> str:
        return self.text[:80]


class MemorySource(models.Model):
    """An event a memory was derived from, with the words that support it, and the attached
    file it was drawn from when it was."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="sources")
    event = models.ForeignKey(EventRecord, on_delete=models.CASCADE, related_name="memory_sources")
    excerpt = models.TextField(blank=True)
    artifact = models.ForeignKey(
        ArtifactRecord,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_sources",
        help_text="The file of that event the memory was drawn from, if any.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "event"], name="memory_source_event"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} <- {self.event_id}"


class MemoryRevision(models.Model):
    """One change of a memory: before, after, why, and who (a job or a person)."""

    class Action(models.TextChoices):
        CREATED = "created", "Created"
        UPDATED = "updated", "Updated"
        INVALIDATED = "invalidated", "Invalidated"
        DELETED = "deleted", "Deleted"
        RESTORED = "restored", "Restored"
        QUARANTINED = "quarantined", "Quarantined"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        SOURCES_CHANGED = "sources_changed", "Sources changed"
        EXPIRY_CHANGED = "expiry_changed", "Expiry changed"
        RETIRED = "retired", "Retired"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="revisions")
    action = models.CharField(max_length=32, choices=Action.choices)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    actor_job = models.ForeignKey(
        GenerationJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="revisions"
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_revisions_made",
    )
    source_event = models.ForeignKey(
        EventRecord,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_revisions",
        help_text="The turn whose words made this change (an update or invalidation).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.action} {self.memory_id}"


class TurnVector(models.Model):
    """The embedding of a past user turn, made once in the background after it was stored
    (``memory_app.tasks.embeddings_compute``), under the name of the embedder that made it: a
    search embeds only its query. Goes with its event (a deleted chat takes it along).

    Where PostgreSQL has pgvector, migration 0013 adds a ``vector`` column beside
    ``embedding`` holding the same vector, with an HNSW index per dimension
    (``memory_app.selectors.turn_vectors``); ``embedding`` (float32 bytes) is what every
    database reads back."""

    event = models.OneToOneField(
        EventRecord, on_delete=models.CASCADE, primary_key=True, related_name="turn_vector"
    )
    embedding = models.BinaryField(editable=False)
    embedding_model = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["embedding_model"], name="turn_vector_model")]

    def __str__(self) -> str:
        return f"vector of event {self.event_id} by {self.embedding_model}"


class EmbeddingFailure(models.Model):
    """An embedding task that gave up: what it was to embed, by which embedder, after how
    many attempts and why. The items stay without a vector (searched by their words) until
    a later task or ``manage.py memory_embed`` embeds them."""

    embedder = models.CharField(max_length=128)
    memory_ids = models.JSONField(default=list, blank=True)
    session_key = models.CharField(max_length=128, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    error = models.TextField()
    failed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["failed_at"], name="embedding_failure_time")]

    def __str__(self) -> str:
        return f"embedding by {self.embedder} failed at {self.failed_at:%Y-%m-%d %H:%M:%S}"


class EmbeddingWarning(models.Model):
    """That the embedding model failed, or answered vectors of the wrong shape, while a turn
    searched or a background task embedded: memory search went by words alone meanwhile.
    One open warning a kind, however often it happens (``occurrences``, the last ``error``),
    until staff acknowledge it or the embeddings work again (``closed_at``); the staff
    console's home shows the open ones."""

    class Kind(models.TextChoices):
        FAILED = "failed", "Embeddings failed"
        WRONG_SHAPE = "wrong_shape", "Embeddings of the wrong shape"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    embedder = models.CharField(max_length=128)
    error = models.TextField()
    occurrences = models.PositiveIntegerField(default=1)
    first_at = models.DateTimeField(auto_now_add=True)
    last_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_how = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind"],
                condition=models.Q(closed_at__isnull=True),
                name="embedding_warning_open_kind",
            )
        ]
        default_permissions = ("view", "change")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.embedder})"
