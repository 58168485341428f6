"""Request validation and response shapes of the memory REST API, and the words the Memory
page and the API share: a source's excerpt and link, a revision's actor."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api import StrictBooleanField, StrictCharField
from memory_app.models import Memory, MemoryRevision, MemorySource
from memory_app.selectors import event_text
from memory_app.services.memories import CORRECTION_MAX_CHARS
from sessions_app.artifact_files import USER_PREFIX
from sessions_app.models import ArtifactRecord
from sessions_app.selectors import session_chat_url
from sessions_app.serializers import identifier_field

EXCERPT_MAX_CHARS = 300
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
SEARCH_LIMIT = 50


def source_excerpt(source: MemorySource) -> str:
    """The words that support the memory: the stored excerpt, else the event's own text."""
    text = source.excerpt or event_text(source.event)
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_MAX_CHARS else text[: EXCERPT_MAX_CHARS - 1] + "…"


def source_url(source: MemorySource) -> str:
    """The chat page of the source's conversation, scrolled to that turn."""
    return f"{session_chat_url(source.event.session)}#event-{source.event.event_id}"


@dataclass(frozen=True)
class MemoryFile:
    """A file a memory keeps or was drawn from, as its owner sees it: its name (without the
    ``user:`` prefix of a kept copy), its type, and the links that open, download and (for an
    image) preview it."""

    id: str
    filename: str
    mime_type: str
    size: int
    is_image: bool
    url: str
    download_url: str
    thumbnail_url: str | None


def memory_file(record: ArtifactRecord) -> MemoryFile:
    url = reverse("sessions_api:artifact-content", args=[record.pk])
    is_image = record.mime_type.startswith("image/")
    return MemoryFile(
        id=str(record.pk),
        filename=record.filename.removeprefix(USER_PREFIX),
        mime_type=record.mime_type,
        size=record.size,
        is_image=is_image,
        url=url,
        download_url=f"{url}?download=1",
        thumbnail_url=reverse("sessions_api:artifact-thumbnail", args=[record.pk])
        if is_image
        else None,
    )


class MemoryFileSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The file's artifact id.")
    filename = serializers.CharField()
    mime_type = serializers.CharField()
    size = serializers.IntegerField(help_text="In bytes.")
    is_image = serializers.BooleanField()
    url = serializers.CharField(help_text="Opens the file (its owner only).")
    download_url = serializers.CharField()
    thumbnail_url = serializers.CharField(allow_null=True, help_text="Images only.")


def revision_actor(revision: MemoryRevision, *, user_pk: int) -> str:
    """Who made a change, as its owner should read it (no staff member's name)."""
    if revision.actor_user_id == user_pk:
        return "you"
    if revision.actor_user_id is not None:
        return "staff"
    if revision.actor_job_id is not None:
        return "memory generation"
    return "automatic maintenance"


def _default_app_name() -> str:
    return settings.DEFAULT_APP_NAME


class MemoryQuerySerializer(serializers.Serializer):
    app_name = identifier_field(
        default=_default_app_name, help_text="Defaults to the site's default app."
    )
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=1000,
        help_text="Search words: answers the best matches among active memories, best first "
        "(at most 50, no further pages). Empty or left out lists every memory by topic.",
    )
    page = serializers.IntegerField(min_value=1, default=1)
    page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, default=50)


class AppQuerySerializer(serializers.Serializer):
    app_name = identifier_field(
        default=_default_app_name, help_text="Defaults to the site's default app."
    )


class MemoryCorrectSerializer(serializers.Serializer):
    text = StrictCharField(
        max_length=CORRECTION_MAX_CHARS,
        help_text="What is true instead. It becomes an explicit, fully trusted memory; the "
        "old text is kept in the memory's history.",
    )


class MemorySourceSerializer(serializers.Serializer):
    session_id = serializers.CharField(source="event.session.session_id")
    event_id = serializers.CharField(source="event.event_id")
    author = serializers.CharField(source="event.author")
    timestamp = serializers.FloatField(source="event.timestamp", help_text="Seconds since epoch.")
    excerpt = serializers.SerializerMethodField(help_text="The words the memory came from.")
    url = serializers.SerializerMethodField(help_text="The chat page at that turn.")
    file = serializers.SerializerMethodField(
        help_text="The file attached at that turn the memory was drawn from (null if none)."
    )

    def get_excerpt(self, source: MemorySource) -> str:
        return source_excerpt(source)

    def get_url(self, source: MemorySource) -> str:
        return source_url(source)

    @extend_schema_field(MemoryFileSerializer(allow_null=True))
    def get_file(self, source: MemorySource) -> dict | None:
        return asdict(memory_file(source.artifact)) if source.artifact else None


class MemoryRevisionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=MemoryRevision.Action.choices)
    before = serializers.JSONField(help_text="What changed, before (null on creation).")
    after = serializers.JSONField(help_text="What changed, after (null on deletion).")
    reason = serializers.CharField()
    actor = serializers.SerializerMethodField(
        help_text='"you", "staff", "memory generation" or "automatic maintenance".'
    )
    created_at = serializers.DateTimeField()

    def get_actor(self, revision: MemoryRevision) -> str:
        return revision_actor(revision, user_pk=self.context["user_pk"])


class MemorySerializer(serializers.ModelSerializer):
    sources = MemorySourceSerializer(
        many=True, help_text="Why it exists: the turns it came from, in conversation order."
    )
    revisions = MemoryRevisionSerializer(many=True, help_text="Its history, oldest first.")
    session_id = serializers.CharField(
        read_only=True, allow_null=True, help_text="Set for session-scope memories only."
    )
    structured = serializers.JSONField(
        read_only=True, help_text="The fact as structured JSON, when it has one (else null)."
    )
    score = serializers.FloatField(
        required=False, help_text="Relevance to the search words; only in search results."
    )
    image = serializers.SerializerMethodField(
        help_text='The file the memory keeps ("remember this logo"), or null.'
    )

    class Meta:
        model = Memory
        fields = [
            "id",
            "app_name",
            "scope",
            "session_id",
            "topic",
            "text",
            "structured",
            "source_type",
            "confidence",
            "importance",
            "status",
            "created_at",
            "updated_at",
            "expires_at",
            "score",
            "image",
            "sources",
            "revisions",
        ]

    @extend_schema_field(MemoryFileSerializer(allow_null=True))
    def get_image(self, instance: Memory) -> dict | None:
        return asdict(memory_file(instance.image)) if instance.image else None

    def to_representation(self, instance: Memory) -> dict[str, Any]:
        data = super().to_representation(instance)
        if getattr(instance, "score", None) is None:
            data.pop("score", None)
        return data


class MemoryPageSerializer(serializers.Serializer):
    results = MemorySerializer(many=True)
    next_page = serializers.IntegerField(
        allow_null=True, help_text="Pass as `page` for the next page; null on the last."
    )


class MemoriesDeletedSerializer(serializers.Serializer):
    deleted = serializers.IntegerField(help_text="How many memories were deleted.")


class PendingMemorySerializer(serializers.Serializer):
    unprocessed_turns = serializers.IntegerField(
        help_text="Your messages in this chat not yet turned into memories."
    )
    turns = serializers.ListField(
        child=serializers.CharField(), help_text="The last of them, oldest first."
    )
    job = serializers.CharField(
        allow_null=True,
        help_text="'queued' or 'running' when a memory job will take them; 'waiting' when "
        "its last attempt failed on an error that passes (the model server down) and it will "
        "be tried again at `next_attempt_at`; 'failed' or 'dead' when the chat's last job "
        "gave up.",
    )
    job_error = serializers.CharField(help_text="Why the job waits or gave up (empty otherwise).")
    next_attempt_at = serializers.DateTimeField(
        allow_null=True, help_text="When a waiting job is tried again."
    )
    create = serializers.BooleanField(help_text="Whether memories are made from this chat.")
    temporary = serializers.BooleanField()
    forgotten_with_it = serializers.IntegerField(
        help_text="How many of your memories deleting this chat would delete: those drawn "
        "from it alone (the others are derived again from what remains)."
    )


class MemorySettingsSerializer(serializers.Serializer):
    create_enabled = StrictBooleanField(required=False, help_text="Create memories from my chats.")
    use_enabled = StrictBooleanField(required=False, help_text="Use memories in replies.")
    past_chats_enabled = StrictBooleanField(
        required=False,
        help_text="Reference past chats: replies may search what you said in your other chats "
        "(only while memories are used).",
    )
