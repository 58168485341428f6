"""Memories in the staff console: their filters, the read-only page of a memory with its
provenance and history, the review actions (approve, reject, invalidate, restore, delete,
re-run generation), each confirmed with a reason, and the page that corrects the text of an
app's shared memory with a reason; all carried out by ``memory_app.services.review``."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.db.models import OuterRef, Subquery
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.text import Truncator

from access_app.audit import audit_object_viewed, audit_page_viewed
from access_app.models import AccessScope
from access_app.selectors import (
    grants_active_for,
    memories_visible_to_staff,
    staff_has_global_view,
    staff_may_view_user_data,
)
from core.admin import ReadOnlyAdmin, console_time
from memory_app import selectors
from memory_app.admin.actions import _apply, _back_to, reason_confirmed, sessions_regenerate
from memory_app.admin.app_memories import AppMemoryEditing
from memory_app.models import TRUST, Memory, MemoryStatus, MemoryTopic, SourceType
from memory_app.serializers import memory_file
from memory_app.services import review
from memory_app.topics import topic_label
from sessions_app.admin import conversation_entry
from sessions_app.models import EventRecord
from sessions_app.selectors import artifact_staff_may_read, artifact_staff_scope

CONFIDENCE_RANGES = {
    "low": ("Below 0.4", 0.0, 0.4),
    "medium": ("0.4 to 0.7", 0.4, 0.7),
    "high": ("0.7 to 0.9", 0.7, 0.9),
    "very-high": ("0.9 and above", 0.9, 1.01),
}


class ConfidenceRangeFilter(admin.SimpleListFilter):
    title = "confidence"
    parameter_name = "confidence"

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _low, _high) in CONFIDENCE_RANGES.items()]

    def queryset(self, request, queryset):
        if self.value() not in CONFIDENCE_RANGES:
            return queryset
        _label, low, high = CONFIDENCE_RANGES[self.value()]
        return queryset.filter(confidence__gte=low, confidence__lt=high)


class TopicFilter(admin.SimpleListFilter):
    """The topics memories are filed under, by their labels."""

    title = "topic"
    parameter_name = "topic"

    def lookups(self, request, model_admin):
        keys = (
            model_admin.get_queryset(request)
            .order_by("topic")
            .values_list("topic", flat=True)
            .distinct()
        )
        labels = dict(
            MemoryTopic.objects.exclude(label="").order_by("-managed").values_list("key", "label")
        )
        return sorted(
            ((key, topic_label(key=key, label=labels.get(key, ""))) for key in keys),
            key=lambda lookup: lookup[1].casefold(),
        )

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        return queryset.filter(topic=self.value())


def snapshot_lines(snapshot) -> list[tuple[str, str]]:
    """A revision's snapshot as (field, value) lines; scores to two places, as everywhere else."""
    if not isinstance(snapshot, dict):
        return []
    return [(key, _snapshot_value(key, value)) for key, value in snapshot.items()]


def _snapshot_value(key: str, value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if key == "topic" and isinstance(value, str):
        return topic_label(key=value)
    return str(value)


def source_speaker(event: EventRecord) -> str:
    """Who a source turn is from, named as the conversation view names them; a tool call says
    so, or words an agent passed to ``create_memory`` would read as its reply."""
    calls = sorted(
        {
            part["function_call"].get("name") or "tool"
            for part in (event.content or {}).get("parts") or []
            if isinstance(part, dict) and isinstance(part.get("function_call"), dict)
        }
    )
    speaker = conversation_entry(event).role
    return f"{speaker}, {' and '.join(calls)} call" if calls else speaker


class QuarantinedFilter(admin.SimpleListFilter):
    title = "quarantined"
    parameter_name = "quarantined"

    def lookups(self, request, model_admin):
        return [("yes", "Awaiting review"), ("no", "Not quarantined")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(status=MemoryStatus.QUARANTINED)
        if self.value() == "no":
            return queryset.exclude(status=MemoryStatus.QUARANTINED)
        return queryset


def _memory_action(*, name: str, description: str, service, permission: str, reason_required: bool):
    def action(modeladmin, request, queryset):
        memories = list(queryset)
        reason = reason_confirmed(
            modeladmin, request, queryset, title=description, reason_required=reason_required
        )
        if isinstance(reason, TemplateResponse):
            return reason
        _apply(
            modeladmin,
            request,
            memories,
            lambda memory: service(
                memory_id=str(memory.pk),
                actor=request.user,
                reason=reason,
                path=request.get_full_path(),
            ),
            done=description,
        )
        return _back_to(request)

    action.__name__ = name
    return admin.action(description=description, permissions=[permission])(action)


@admin.register(Memory)
class MemoryAdmin(AppMemoryEditing, ReadOnlyAdmin):
    # Fits the console at 1280 px beside the navigation and the filters (the app and the
    # source type are among those); a memory's page has every field.
    list_display = [
        "short_text",
        "user",
        "scope",
        "topic_shown",
        "confidence_shown",
        "status",
        "updated",
    ]
    list_filter = [
        ("user", admin.RelatedOnlyFieldListFilter),
        "app_name",
        "scope",
        TopicFilter,
        "source_type",
        "status",
        ConfidenceRangeFilter,
        QuarantinedFilter,
    ]
    search_fields = ["text", "user__username", "topic", "sources__excerpt"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    ordering = ["-updated_at"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "text",
                    "structured",
                    "user",
                    "app_name",
                    "scope",
                    "session",
                    "topic_shown",
                    "status",
                    "review_reason",
                ]
            },
        ),
        (
            "Details",
            {
                "classes": ["collapse"],
                "fields": [
                    "source_type",
                    "confidence_shown",
                    "importance_shown",
                    "created_at",
                    "updated_at",
                    "expires_at",
                    "embedding_model",
                ],
            },
        ),
    ]
    readonly_fields = [field for _name, options in fieldsets for field in options["fields"]]
    change_form_template = "admin/memory_app/memory/change_form.html"
    actions = [
        _memory_action(
            name="approve",
            description="Approve quarantined memories",
            service=review.memory_quarantine_approve,
            permission="memory_review",
            reason_required=False,
        ),
        _memory_action(
            name="reject",
            description="Reject quarantined memories",
            service=review.memory_quarantine_reject,
            permission="memory_review",
            reason_required=True,
        ),
        _memory_action(
            name="invalidate",
            description="Invalidate memories",
            service=review.memory_invalidate,
            permission="memory_change",
            reason_required=True,
        ),
        _memory_action(
            name="restore",
            description="Restore invalidated memories",
            service=review.memory_restore,
            permission="memory_change",
            reason_required=False,
        ),
        _memory_action(
            name="expire_in_30_days",
            description="Forget memories in 30 days",
            service=review.memory_staff_expiry,
            permission="memory_change",
            reason_required=True,
        ),
        _memory_action(
            name="clear_expiry",
            description="Keep memories until deleted (clear their expiry)",
            service=review.memory_staff_expiry_clear,
            permission="memory_change",
            reason_required=False,
        ),
        _memory_action(
            name="delete_memories",
            description="Delete memories",
            service=review.memory_staff_delete,
            permission="memory_delete",
            reason_required=True,
        ),
        "regenerate_sessions",
    ]

    @admin.display(description="memory", ordering="text")
    def short_text(self, memory: Memory) -> str:
        return Truncator(memory.text).chars(90)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, memory: Memory) -> str:
        return console_time(memory.updated_at)

    @admin.display(description="topic", ordering="topic")
    def topic_shown(self, memory: Memory) -> str:
        return topic_label(key=memory.topic, label=getattr(memory, "topic_app_label", None) or "")

    @admin.display(description="confidence", ordering="confidence")
    def confidence_shown(self, memory: Memory) -> str:
        return f"{memory.confidence:.2f}"

    @admin.display(description="importance", ordering="importance")
    def importance_shown(self, memory: Memory) -> str:
        return f"{memory.importance:.2f}"

    def has_memory_review_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.review_quarantine")

    def has_memory_change_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.change_memory")

    def has_memory_delete_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.delete_memory")

    def has_regenerate_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.add_generationjob")

    @admin.action(
        description="Re-run generation for the memories' sessions", permissions=["regenerate"]
    )
    def regenerate_sessions(self, request, queryset):
        session_ids = sorted(
            set(queryset.values_list("sources__event__session_id", flat=True)) - {None}
        )
        return sessions_regenerate(self, request, session_ids)

    def has_module_permission(self, request) -> bool:
        return super().has_module_permission(request) or self.has_view_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        """A role with the model permission reads every memory; a staff account holding a
        user's grant reads that user's memories only (the queryset and ``rules`` see to it)."""
        if obj is not None:
            return request.user.has_perm("memory_app.view_memory", obj)
        return staff_has_global_view(staff=request.user, scope=AccessScope.MEMORIES) or (
            grants_active_for(grantee=request.user, scope=AccessScope.MEMORIES).exists()
        )

    def get_model_perms(self, request) -> dict[str, bool]:
        return {**super().get_model_perms(request), "view": self.has_view_permission(request)}

    def get_queryset(self, request):
        app_label = MemoryTopic.objects.filter(
            app_name=OuterRef("app_name"), key=OuterRef("topic")
        ).values("label")[:1]
        queryset = super().get_queryset(request).annotate(topic_app_label=Subquery(app_label))
        return memories_visible_to_staff(staff=request.user, queryset=queryset)

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context=extra_context)
        audit_page_viewed(request, response, object_type=Memory._meta.label_lower)
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        memory = self.get_object(request, unquote(object_id))
        extra = dict(extra_context or {})
        if memory is not None and self.has_view_permission(request, memory):
            extra.update(self._provenance_context(request, memory))
        response = super().change_view(request, object_id, form_url, extra_context=extra)
        audit_object_viewed(request, response, memory)
        return response

    def history_view(self, request, object_id, extra_context=None):
        response = super().history_view(request, object_id, extra_context=extra_context)
        audit_object_viewed(request, response, self.get_object(request, unquote(object_id)))
        return response

    @staticmethod
    def _file_shown(request, record) -> dict | None:
        """A file of the memory as the console shows it: its name always, and its preview
        and link only to a reader the file's download lets in (the owner's grant), which is
        where each opening is audited."""
        if record is None:
            return None
        may_open = record.user_id == request.user.pk or artifact_staff_may_read(
            staff=request.user, record=record
        )
        return {
            "file": memory_file(record),
            "may_open": may_open,
            "grant": artifact_staff_scope(record),
        }

    def _provenance_context(self, request, memory: Memory) -> dict:
        may_read_conversations = staff_may_view_user_data(
            staff=request.user, subject_user_pk=memory.user_id, scope=AccessScope.CONVERSATIONS
        )
        sources = []
        for source in selectors.memory_provenance_sources(memory_id=memory.pk):
            event = source.event
            link = None
            if may_read_conversations:
                url = reverse(
                    "admin:sessions_app_sessionrecord_change", args=[quote(event.session_id)]
                )
                link = f"{url}#event-{event.event_id}"
            sources.append(
                {
                    "source": source,
                    "event": event,
                    "link": link,
                    "speaker": source_speaker(event),
                    "file": self._file_shown(request, source.artifact),
                }
            )
        actions = [
            (name, description)
            for name, (_function, _name, description) in self.get_actions(request).items()
            if name in _DETAIL_ACTIONS.get(memory.status, ())
        ]
        return {
            "provenance_sources": sources,
            "kept_file": self._file_shown(request, memory.image),
            "revisions": [
                {
                    "revision": revision,
                    "before": snapshot_lines(revision.before),
                    "after": snapshot_lines(revision.after),
                }
                for revision in selectors.memory_revisions(memory_id=memory.pk)
            ],
            "generation_job": memory.job,
            "trust_rank": TRUST[SourceType(memory.source_type)],
            "trust_levels": len(TRUST),
            "detail_actions": actions,
            "changelist_url": reverse("admin:memory_app_memory_changelist"),
            "edit_url": self.app_memory_edit_url(request, memory),
        }


_DETAIL_ACTIONS = {
    MemoryStatus.QUARANTINED: ("approve", "reject", "delete_memories"),
    MemoryStatus.ACTIVE: ("invalidate", "delete_memories", "regenerate_sessions"),
    MemoryStatus.INVALIDATED: ("restore", "delete_memories"),
    MemoryStatus.REJECTED: ("delete_memories",),
    MemoryStatus.RETIRED: ("delete_memories",),
}
