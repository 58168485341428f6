"""Sessions and their events in the staff console: read-only, events shown as the conversation.

Message text is rendered through the chat's own safe Markdown (``sessions_app.markdown``), so
whatever a user or a model wrote shows as text and never runs in a staff member's browser; tool
calls and results are one line each, as the chat shows them, their JSON on demand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import Count
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from access_app.audit import audit_object_viewed, audit_page_viewed
from access_app.models import AccessScope
from access_app.selectors import (
    grants_active_for,
    sessions_visible_to_staff,
    staff_has_global_view,
)
from core.admin import ReadOnlyAdmin
from sessions_app.errors import SessionStoreError
from sessions_app.events import ATTACHMENTS_KEY, TOOL_STEPS_KEY
from sessions_app.markdown import markdown_render_safe
from sessions_app.models import AppState, EventRecord, SessionRecord
from sessions_app.selectors import staff_may_open_files
from sessions_app.services import app_state as app_state_services
from sessions_app.services.app_state import APP_STATE_PERMISSION
from sessions_app.state import APP_PREFIX, PREFIXES, state_key_validate, state_value_validate


@dataclass(frozen=True)
class ToolStep:
    """A tool call or result as one line, its JSON shown on demand."""

    summary: str
    detail: str


@dataclass(frozen=True)
class ConversationEntry:
    """One event as a staff member reads it."""

    event: EventRecord
    role: str
    html: SafeString
    steps: list[ToolStep]
    when: datetime
    files: list[dict] = field(default_factory=list)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _failed(response: object) -> bool:
    return isinstance(response, dict) and (response.get("status") == "error" or "error" in response)


def _speaker(event: EventRecord, *, only_results: bool) -> str:
    """Who an event is from: the user, the agent (by name when it is not the default
    assistant), a tool's result, or the system. The content's role is not it: a tool's result
    travels in a "user" content, though no user wrote it."""
    if event.author == "user":
        return "User"
    if event.author == "system":
        return "System"
    if only_results:
        return "Tool result"
    return "Assistant" if event.author == "assistant" else f"Assistant ({event.author})"


def conversation_entry(event: EventRecord) -> ConversationEntry:
    """The event's text as safe HTML, and one step per tool call or tool result."""
    content = event.content or {}
    steps_said = (event.custom_metadata or {}).get(TOOL_STEPS_KEY) or {}
    texts, steps = [], []
    results = 0
    for part in content.get("parts") or []:
        if part.get("thought"):
            continue
        if part.get("text"):
            texts.append(part["text"])
        if part.get("function_call"):
            call = part["function_call"]
            name = call.get("name", "?")
            summary = steps_said.get(call.get("id")) or f"Called {name}"
            steps.append(ToolStep(summary=summary, detail=_json({name: call.get("args") or {}})))
        if part.get("function_response"):
            results += 1
            response = part["function_response"]
            name = response.get("name", "?")
            answer = response.get("response")
            fallback = f"{name} failed" if _failed(answer) else f"Result of {name}"
            summary = steps_said.get(response.get("id")) or fallback
            steps.append(ToolStep(summary=summary, detail=_json({name: answer})))
    attached = (event.custom_metadata or {}).get(ATTACHMENTS_KEY) if event.author == "user" else []
    return ConversationEntry(
        event=event,
        role=_speaker(event, only_results=bool(results) and not texts),
        html=mark_safe(markdown_render_safe("\n\n".join(texts))),
        steps=steps,
        when=datetime.fromtimestamp(event.timestamp, tz=UTC),
        files=[
            {
                "filename": str(each.get("filename", "")),
                "mime_type": str(each.get("mime_type", "")),
                "size": each.get("size"),
                "url": reverse("sessions_api:artifact-content", args=[each["id"]]),
            }
            for each in attached or []
            if isinstance(each, dict) and isinstance(each.get("id"), str)
        ],
    )


@admin.register(SessionRecord)
class SessionRecordAdmin(ReadOnlyAdmin):
    # The title links to the conversation; the app is a filter: the list fits the console at
    # 1280 px, a session's page has every field. Temporary chats are never shown: what their
    # person was told keeps nothing is not read by staff either.
    list_display = ["title_shown", "user", "updated", "event_total"]
    list_display_links = ["title_shown"]
    list_filter = ["app_name"]
    search_fields = ["session_id", "title", "user__username"]
    list_select_related = ["user"]
    ordering = ["-last_update_time"]
    fields = ["session_id", "title", "user", "app_name", "temporary", "created_at", "last_sequence"]
    readonly_fields = fields
    change_form_template = "admin/sessions_app/sessionrecord/change_form.html"

    @admin.display(description="chat", ordering="title")
    def title_shown(self, session: SessionRecord) -> str:
        return session.title or f"Untitled ({Truncator(session.session_id).chars(9)})"

    @admin.display(description="last update", ordering="last_update_time")
    def updated(self, session: SessionRecord) -> datetime:
        return datetime.fromtimestamp(session.last_update_time, tz=UTC)

    @admin.display(description="events", ordering="events_stored")
    def event_total(self, session: SessionRecord) -> int:
        return session.events_stored

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
        sessions = (
            super()
            .get_queryset(request)
            .exclude(temporary=True)
            .annotate(events_stored=Count("events"))
        )
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
            # Files open with the owner's grant only (a role is not enough); the download
            # writes each opening to the owner's audit log.
            extra["files_openable"] = session.user_id == request.user.pk or staff_may_open_files(
                staff=request.user, owner_pk=session.user_id, scope=AccessScope.CONVERSATIONS
            )
        response = super().change_view(request, object_id, form_url, extra_context=extra)
        audit_object_viewed(request, response, session)
        return response

    def history_view(self, request, object_id, extra_context=None):
        response = super().history_view(request, object_id, extra_context=extra_context)
        audit_object_viewed(request, response, self.get_object(request, unquote(object_id)))
        return response


SUMMARY_CHARS = 160


class AppStateForm(forms.ModelForm):
    """One ``app:`` key: its app, its name without the prefix, a JSON value, and why."""

    value = forms.JSONField(
        required=False, help_text='A JSON value: "text" in quotes, a number, true, {...}.'
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why, for the audit log. Every user of the app and its agent see app state.",
    )

    class Meta:
        model = AppState
        fields = ["app_name", "key", "value"]
        help_texts = {"key": "Without the app: prefix."}

    def clean(self):
        cleaned = super().clean()
        key = cleaned.get("key")
        if key and key.lower().startswith(PREFIXES):
            raise forms.ValidationError({"key": "Give the key without a scope prefix."})
        if key:
            try:
                state_key_validate(APP_PREFIX + key)
                state_value_validate(APP_PREFIX + key, cleaned.get("value"))
            except SessionStoreError as error:
                raise forms.ValidationError(str(error)) from None
        return cleaned


@admin.register(AppState)
class AppStateAdmin(admin.ModelAdmin):
    """App state in the staff console: read by staff with the view permission, written only
    by those holding ``sessions_app.change_app_state``, each change audited through
    ``sessions_app.services.app_state``."""

    form = AppStateForm
    list_display = ["app_name", "prefixed_key", "value_preview"]
    list_filter = ["app_name"]
    search_fields = ["app_name", "key"]
    ordering = ["app_name", "key"]

    @admin.display(description="key", ordering="key")
    def prefixed_key(self, row: AppState) -> str:
        return APP_PREFIX + row.key

    @admin.display(description="value")
    def value_preview(self, row: AppState) -> str:
        return Truncator(json.dumps(row.value, ensure_ascii=False)).chars(SUMMARY_CHARS)

    def _may_change(self, request) -> bool:
        return request.user.has_perm(APP_STATE_PERMISSION)

    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj) or self._may_change(request)

    def has_add_permission(self, request) -> bool:
        return self._may_change(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._may_change(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._may_change(request)

    def get_readonly_fields(self, request, obj=None):
        return ["app_name", "key"] if obj is not None else []

    def save_model(self, request, obj, form, change) -> None:
        saved = app_state_services.app_state_set(
            actor=request.user,
            app_name=obj.app_name,
            key=obj.key,
            value=form.cleaned_data.get("value"),
            reason=form.cleaned_data["reason"],
        )
        obj.pk = saved.pk

    def delete_model(self, request, obj) -> None:
        app_state_services.app_state_delete(
            actor=request.user,
            app_name=obj.app_name,
            key=obj.key,
            reason="Deleted in the staff console.",
        )

    def delete_queryset(self, request, queryset) -> None:
        for row in queryset:
            self.delete_model(request, row)
