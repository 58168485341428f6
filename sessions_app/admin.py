"""Sessions and their events in the staff console: read-only, events shown as the conversation.

Message text is rendered through the chat's own safe Markdown (``sessions_app.markdown``), so
whatever a user or a model wrote shows as text and never runs in a staff member's browser; tool
calls and results are summarised rather than dumped as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import Count
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from access_app.models import AccessScope
from access_app.selectors import (
    grants_active_for,
    sessions_visible_to_staff,
    staff_has_global_view,
)
from chatapp.admin import ReadOnlyAdmin
from memory_app.admin import audit_object_viewed, audit_page_viewed
from sessions_app.markdown import markdown_render_safe
from sessions_app.models import EventRecord, SessionRecord

SUMMARY_CHARS = 160
ROLE_NAMES = {"user": "User", "model": "Agent"}


@dataclass(frozen=True)
class ConversationEntry:
    """One event as a staff member reads it."""

    event: EventRecord
    role: str
    html: SafeString
    tool_calls: list[str]
    tool_results: list[str]
    when: datetime


def _compact(value: object) -> str:
    return Truncator(json.dumps(value, ensure_ascii=False, default=str)).chars(SUMMARY_CHARS)


def conversation_entry(event: EventRecord) -> ConversationEntry:
    """The event's text as safe HTML, and one line per tool call or tool result."""
    content = event.content or {}
    texts, calls, results = [], [], []
    for part in content.get("parts") or []:
        if part.get("thought"):
            continue
        if part.get("text"):
            texts.append(part["text"])
        if part.get("function_call"):
            call = part["function_call"]
            calls.append(f"{call.get('name', '?')}({_compact(call.get('args') or {})})")
        if part.get("function_response"):
            response = part["function_response"]
            results.append(f"{response.get('name', '?')} → {_compact(response.get('response'))}")
    role = ROLE_NAMES.get(content.get("role", ""), event.author)
    if event.author not in ("user", role):
        role = f"{role} ({event.author})"
    return ConversationEntry(
        event=event,
        role=role,
        html=mark_safe(markdown_render_safe("\n\n".join(texts))),
        tool_calls=calls,
        tool_results=results,
        when=datetime.fromtimestamp(event.timestamp, tz=UTC),
    )


@admin.register(SessionRecord)
class SessionRecordAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "title", "user", "app_name", "temporary", "updated", "event_total"]
    list_filter = ["app_name", "temporary"]
    search_fields = ["id", "title", "user__username"]
    list_select_related = ["user"]
    ordering = ["-last_update_time"]
    fields = ["id", "title", "user", "app_name", "temporary", "created_at", "last_sequence"]
    readonly_fields = fields
    change_form_template = "admin/sessions_app/sessionrecord/change_form.html"
    actions = ["regenerate_memories"]

    @admin.display(description="last update", ordering="last_update_time")
    def updated(self, session: SessionRecord) -> datetime:
        return datetime.fromtimestamp(session.last_update_time, tz=UTC)

    @admin.display(description="events", ordering="events_stored")
    def event_total(self, session: SessionRecord) -> int:
        return session.events_stored

    def has_regenerate_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.add_generationjob")

    @admin.action(description="Re-run memory generation", permissions=["regenerate"])
    def regenerate_memories(self, request, queryset):
        from memory_app.admin import sessions_regenerate

        return sessions_regenerate(self, request, list(queryset.values_list("pk", flat=True)))

    def has_module_permission(self, request) -> bool:
        return super().has_module_permission(request) or self.has_view_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        """A role with the model permission reads every conversation; a staff account holding
        a user's "conversations" grant reads that user's only."""
        if obj is not None:
            return request.user.has_perm("sessions_app.view_sessionrecord", obj)
        return staff_has_global_view(staff=request.user, scope=AccessScope.CONVERSATIONS) or (
            grants_active_for(grantee=request.user, scope=AccessScope.CONVERSATIONS).exists()
        )

    def get_model_perms(self, request) -> dict[str, bool]:
        return {**super().get_model_perms(request), "view": self.has_view_permission(request)}

    def get_queryset(self, request):
        sessions = super().get_queryset(request).annotate(events_stored=Count("events"))
        return sessions_visible_to_staff(staff=request.user, queryset=sessions)

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context=extra_context)
        audit_page_viewed(request, response, object_type=SessionRecord._meta.label_lower)
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        session = self.get_object(request, unquote(object_id))
        extra = dict(extra_context or {})
        if session is not None and self.has_view_permission(request, session):
            events = session.events.order_by("sequence")
            extra["conversation"] = [conversation_entry(event) for event in events]
        response = super().change_view(request, object_id, form_url, extra_context=extra)
        audit_object_viewed(request, response, session)
        return response

    def history_view(self, request, object_id, extra_context=None):
        response = super().history_view(request, object_id, extra_context=extra_context)
        audit_object_viewed(request, response, self.get_object(request, unquote(object_id)))
        return response
