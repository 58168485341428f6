"""Storage of sessions, their events and the three scopes of state.

Sessions and events are written only through ``sessions_app.services``: the
service keeps the invariants that the schema alone cannot (state changes only
through events, contiguous sequence numbers, ``temp:`` keys never stored).
"""

import uuid

from django.conf import settings
from django.db import models


class VerbatimJSONField(models.JSONField):
    """JSON stored as written: a ``json`` column on PostgreSQL rather than ``jsonb``.

    For documents only ever read whole, never queried inside. On every read
    jsonb re-serialises each string it holds: for the content of 2,000 chat
    events that was about 12 ms of server time, most of what reading a long
    session costs the database, where json hands back the stored text. Reads
    select the column as text, so it decodes exactly as a jsonb column does.
    """

    def db_type(self, connection):
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def select_format(self, compiler, sql, params):
        if compiler.connection.vendor == "postgresql":
            return f"({sql})::text", params
        return super().select_format(compiler, sql, params)


def session_key_new() -> str:
    """A fresh surrogate key for a session row: random, so it says nothing of its owner."""
    return uuid.uuid4().hex


class SessionRecord(models.Model):
    """A conversation of one user with one app.

    ``session_id`` is the id ADK and every door name the session by, unique within its
    (app, user) only, as ADK's are: two users, or one user in two apps, may each hold the same
    id, and neither learns of the other's. ``key`` is the row's surrogate key, which the rows of
    events, state, artifacts and memories point to; it never leaves the server. Sessions
    stored while ids were global kept their id as their key.
    ``last_sequence`` is the sequence number of the newest event; bumping
    it with an UPDATE is what serialises concurrent appends on the row lock.
    ``initial_state`` keeps the session-scope state given at creation, from
    which a rewind replays the events it keeps.
    """

    key = models.CharField(
        primary_key=True, max_length=128, default=session_key_new, editable=False
    )
    session_id = models.CharField(max_length=128)
    app_name = models.CharField(max_length=128)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    temporary = models.BooleanField(
        default=False,
        help_text="A temporary chat neither reads nor writes long-term memory.",
    )
    memory_only = models.BooleanField(
        default=False,
        help_text="Holds events given to long-term memory only (ADK's add_events_to_memory): "
        "no conversation, session list or search shows it; memory jobs read it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_update_time = models.FloatField()
    last_sequence = models.PositiveBigIntegerField(default=0)
    initial_state = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "session"
        indexes = [
            models.Index(
                fields=["user", "app_name", "-last_update_time", "-session_id"],
                name="session_user_app_recent_id",
            ),
            models.Index(fields=["last_update_time"], name="session_last_update"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["app_name", "user", "session_id"], name="session_app_user_id"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.app_name}/{self.user_id}/{self.session_id}"


class EventRecord(models.Model):
    """One stored event; ``sequence`` orders a session's events without gaps."""

    session = models.ForeignKey(SessionRecord, on_delete=models.CASCADE, related_name="events")
    sequence = models.PositiveBigIntegerField()
    event_id = models.CharField(max_length=128)
    invocation_id = models.CharField(max_length=128, blank=True)
    author = models.CharField(max_length=128)
    timestamp = models.FloatField()
    content = VerbatimJSONField(null=True, blank=True)
    actions = models.JSONField(default=dict, blank=True)
    turn_complete = models.BooleanField(null=True)
    interrupted = models.BooleanField(null=True)
    branch = models.CharField(max_length=512, blank=True)
    error_code = models.CharField(max_length=128, blank=True)
    error_message = models.TextField(blank=True)
    custom_metadata = models.JSONField(null=True, blank=True)
    usage_metadata = models.JSONField(null=True, blank=True)
    long_running_tool_ids = models.JSONField(null=True, blank=True)
    extra = models.JSONField(
        null=True, blank=True, help_text="Fields of ADK's Event not modelled here, as they came."
    )
    rewound = models.BooleanField(
        default=False, help_text="Hidden from the history by a rewind; kept in storage."
    )
    # Nullable so that adding it keeps the SQLite table (and its search triggers) as it is;
    # events stored before it existed read as not excluded.
    memory_excluded = models.BooleanField(
        null=True,
        default=None,
        help_text="True when said while the user's memory creation was off, or in a temporary "
        "chat: decided when it was stored (sessions_app.consent); no memory job reads it.",
    )

    # The session's owner copied onto each of its events when stored (a session's user and app
    # never change), so that PostgreSQL's indexes find one person's events of a word without
    # reading the sessions (sessions_app.selectors.search, migration 0013). Nullable so that
    # adding them keeps the SQLite table (and its search triggers) as it is; every insert
    # fills them, and migration 0013 filled the events stored before.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        related_name="+",
        help_text="The session's user (deleted with the session, not through this link).",
    )
    app_name = models.CharField(  # noqa: DJ001 - nullable as said above
        max_length=128, null=True, help_text="The session's app."
    )

    class Meta:
        verbose_name = "event"
        constraints = [
            models.UniqueConstraint(fields=["session", "sequence"], name="event_session_sequence"),
            models.UniqueConstraint(fields=["session", "event_id"], name="event_session_event_id"),
        ]
        indexes = [
            models.Index(fields=["session", "invocation_id"], name="event_session_invocation"),
            models.Index(fields=["session", "timestamp"], name="event_session_timestamp"),
            models.Index(
                fields=["user", "app_name", "-timestamp", "-id"],
                name="event_owner_recent",
                condition=models.Q(content__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.sequence} {self.author}"


class SessionState(models.Model):
    """One key of a session's own state (keys without a prefix)."""

    session = models.ForeignKey(SessionRecord, on_delete=models.CASCADE, related_name="state")
    key = models.CharField(max_length=255)
    value = models.JSONField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="session_state_key"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.key}"


class UserState(models.Model):
    """One ``user:`` key, shared by all sessions of a user within an app (stored unprefixed)."""

    app_name = models.CharField(max_length=128)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_user_state"
    )
    key = models.CharField(max_length=255)
    value = models.JSONField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "app_name", "key"], name="user_state_key"),
        ]

    def __str__(self) -> str:
        return f"{self.app_name}/{self.user_id}: user:{self.key}"


class AppState(models.Model):
    """One ``app:`` key, shared by every user's sessions of an app (stored unprefixed)."""

    app_name = models.CharField(max_length=128)
    key = models.CharField(max_length=255)
    value = models.JSONField(null=True)

    class Meta:
        verbose_name = "app state key"
        constraints = [
            models.UniqueConstraint(fields=["app_name", "key"], name="app_state_key"),
        ]
        # Written only through sessions_app.services.app_state (audited), by staff holding the
        # dedicated permission, which no role includes: a superuser gives it by hand.
        default_permissions = ("view",)
        permissions = [
            ("change_app_state", "Can set and remove app state (app: keys every user's agent sees)")
        ]

    def __str__(self) -> str:
        return f"{self.app_name}: app:{self.key}"


class ArtifactRecord(models.Model):
    """One version of an artifact: a file saved by a user or an agent, as ADK's artifacts are.

    An artifact is named by ``filename`` within a session, or within the user's app when the
    name starts with ``user:`` (then ``session`` is empty); each save adds a version, numbered
    from 0. The bytes live in the ``artifacts`` storage under ``storage_name``, a name made of
    the owner's id and a random part: nothing a caller chose ever reaches a storage path. The
    public ``id`` is what a download link carries.
    """

    id = models.UUIDField(primary_key=True)
    app_name = models.CharField(max_length=128)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="artifacts"
    )
    session = models.ForeignKey(
        SessionRecord,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="artifacts",
        help_text="Empty for an artifact of the user (a ``user:`` filename).",
    )
    filename = models.CharField(max_length=255)
    version = models.PositiveIntegerField()
    storage_name = models.CharField(max_length=255, unique=True)
    mime_type = models.CharField(max_length=127)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    is_text = models.BooleanField(
        default=False, help_text="Saved as a text part (given back as text, not inline data)."
    )
    is_file_data = models.BooleanField(
        default=False,
        help_text="Saved as a file_data part (a URI, such as ADK's artifact:// reference): "
        "the file holds the part's JSON, given back as it was saved.",
    )
    custom_metadata = models.JSONField(default=dict, blank=True)
    create_time = models.FloatField()

    class Meta:
        verbose_name = "artifact version"
        constraints = [
            models.UniqueConstraint(
                fields=["session", "filename", "version"],
                condition=models.Q(session__isnull=False),
                name="artifact_session_filename_version",
            ),
            models.UniqueConstraint(
                fields=["user", "app_name", "filename", "version"],
                condition=models.Q(session__isnull=True),
                name="artifact_user_filename_version",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "app_name", "filename"], name="artifact_user_filename"),
        ]

    def __str__(self) -> str:
        scope = self.session_id or "user"
        return f"{self.app_name}/{self.user_id}/{scope}/{self.filename}@{self.version}"


class EventBlob(models.Model):
    """A large part of a stored event, kept in the ``artifacts`` storage beside its row: a
    file's bytes (``inline_data``) or a tool result's JSON (``function_response``) past
    ``EVENT_PART_INLINE_MAX_BYTES``.

    The event's stored content names the file in place of the part's data
    (``sessions_app.event_blobs``); reading the event gives the part back whole. A blob
    belongs to its session and goes with it, its file once the deletion commits.
    """

    id = models.UUIDField(primary_key=True)
    session = models.ForeignKey(SessionRecord, on_delete=models.CASCADE, related_name="blobs")
    storage_name = models.CharField(max_length=255, unique=True)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    create_time = models.FloatField()

    class Meta:
        verbose_name = "event blob"

    def __str__(self) -> str:
        return f"{self.session_id}/{self.id}"


class BackgroundModelCall(models.Model):
    """One model call of an app's background work, with its tokens as the model's server
    reported them: None where the server reported none (llama-cpp-python's streams), never a
    guess. A chat turn's calls are kept on its events instead (``usage_metadata``)."""

    class Purpose(models.TextChoices):
        MEMORY = "memory", "Memory extraction and consolidation"
        REDERIVATION = "rederivation", "Memories derived again"
        SUMMARY = "summary", "Conversation summaries"

    app_name = models.CharField(max_length=128)
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    model = models.CharField(max_length=255)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    called_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["app_name", "called_at"], name="background_call_app_time")]

    def __str__(self) -> str:
        return f"{self.app_name}: {self.purpose} by {self.model}"
