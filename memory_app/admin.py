"""The staff console over long-term memory: memories with their provenance, generation jobs,
topics.

Nothing here writes a memory or a job by itself: content is read-only, and every change is an
admin action that asks for a reason on a confirmation page and calls
``memory_app.services.review``.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import Truncator

from access_app.models import AccessScope, AuditAction
from access_app.selectors import (
    grants_active_for,
    memories_visible_to_staff,
    staff_has_global_view,
    staff_may_view_user_data,
)
from access_app.services import audit_record
from chatapp.admin import ReadOnlyAdmin
from memory_app import selectors
from memory_app.models import TRUST, GenerationJob, Memory, MemoryStatus, MemoryTopic, SourceType
from memory_app.services import review
from memory_app.topics import MANAGED_TOPIC_KEYS

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


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        required=False,
        max_length=2000,
        help_text="Kept in the memory's history and in the audit log the user can read.",
    )


def reason_confirmed(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    title: str,
    reason_required: bool,
) -> str | TemplateResponse:
    """The reason given on the action's confirmation page, or that page (asked again with an
    error when a required reason is missing)."""
    form = ReasonForm(request.POST if "confirm" in request.POST else None)
    if form.is_bound and form.is_valid():
        reason = form.cleaned_data["reason"].strip()
        if reason or not reason_required:
            return reason
        form.add_error("reason", "Say why: this change removes or hides what the user said.")
    form.fields["reason"].required = reason_required
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "objects": queryset,
        "form": form,
        "action": request.POST.get("action", ""),
        "selected": request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME),
        "opts": modeladmin.model._meta,
        "reason_required": reason_required,
        "next": _next_url(request),
    }
    return TemplateResponse(request, "admin/memory_app/action_confirm.html", context)


def _apply(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    items: list,
    change,
    *,
    done: str,
) -> None:
    """Call ``change(item)`` for each item, reporting what was done and what was refused."""
    succeeded = 0
    for item in items:
        try:
            change(item)
        except review.ReviewError as error:
            modeladmin.message_user(request, f"{item}: {error}", messages.WARNING)
        else:
            succeeded += 1
    if succeeded:
        modeladmin.message_user(request, f"{done}: {succeeded}.", messages.SUCCESS)


def audit_page_viewed(request: HttpRequest, response, *, object_type: str) -> None:
    """Record a list page in the audit log of every user whose data it showed."""
    changelist = getattr(response, "context_data", {}).get("cl")
    if response.status_code != 200 or changelist is None:
        return
    for owner_pk in sorted({row.user_id for row in changelist.result_list} - {None}):
        audit_record(
            actor=request.user,
            subject_user_pk=owner_pk,
            action=AuditAction.VIEW,
            object_type=object_type,
            path=request.get_full_path(),
        )


def audit_object_viewed(request: HttpRequest, response, obj) -> None:
    """Record a page of one user's object (memory, session) in that user's audit log."""
    if obj is None or response.status_code != 200:
        return
    audit_record(
        actor=request.user,
        subject_user_pk=obj.user_id,
        action=AuditAction.VIEW,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        path=request.get_full_path(),
    )


def _next_url(request: HttpRequest) -> str:
    """The page the action was started from (``next``), only if it is a page of this site:
    it becomes a redirect and the confirmation page's Cancel link, where another site's
    address or a ``javascript:`` URL must never land."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


def _back_to(request: HttpRequest) -> HttpResponseRedirect | None:
    """Back to the page the action was started from (a memory's detail page), if it is ours."""
    target = _next_url(request)
    return HttpResponseRedirect(target) if target else None


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
class MemoryAdmin(ReadOnlyAdmin):
    list_display = [
        "short_text",
        "user",
        "app_name",
        "scope",
        "topic",
        "source_type",
        "confidence",
        "status",
        "updated_at",
    ]
    list_filter = [
        ("user", admin.RelatedOnlyFieldListFilter),
        "app_name",
        "scope",
        "topic",
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
                    "topic",
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
                    "confidence",
                    "importance",
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
        return memories_visible_to_staff(staff=request.user, queryset=super().get_queryset(request))

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
            sources.append({"source": source, "event": event, "link": link})
        actions = [
            (name, description)
            for name, (_function, _name, description) in self.get_actions(request).items()
            if name in _DETAIL_ACTIONS.get(memory.status, ())
        ]
        return {
            "provenance_sources": sources,
            "revisions": selectors.memory_revisions(memory_id=memory.pk),
            "generation_job": memory.job,
            "trust_rank": TRUST[SourceType(memory.source_type)],
            "trust_levels": len(TRUST),
            "detail_actions": actions,
            "changelist_url": reverse("admin:memory_app_memory_changelist"),
        }


_DETAIL_ACTIONS = {
    MemoryStatus.QUARANTINED: ("approve", "reject", "delete_memories"),
    MemoryStatus.ACTIVE: ("invalidate", "delete_memories", "regenerate_sessions"),
    MemoryStatus.INVALIDATED: ("restore", "delete_memories"),
    MemoryStatus.REJECTED: ("delete_memories",),
}


def sessions_regenerate(
    modeladmin: admin.ModelAdmin, request: HttpRequest, session_ids: list[str]
) -> HttpResponse | None:
    """Queue a re-run of generation for each session, after a confirmation page."""
    from sessions_app.models import SessionRecord

    sessions = SessionRecord.objects.filter(pk__in=session_ids)
    reason = reason_confirmed(
        modeladmin,
        request,
        sessions,
        title="Re-run memory generation for these sessions",
        reason_required=False,
    )
    if isinstance(reason, TemplateResponse):
        return reason
    _apply(
        modeladmin,
        request,
        list(sessions),
        lambda session: review.memory_session_regenerate(
            session_id=session.pk, actor=request.user, reason=reason, path=request.get_full_path()
        ),
        done="Generation queued for sessions",
    )
    return None


class StatusChart:
    """Jobs per status over the last day, as bars sized for an inline SVG."""

    WIDTH = 560
    BAR_HEIGHT = 18
    GAP = 6
    LABEL_WIDTH = 90

    def __init__(self, counts: dict[str, int]) -> None:
        peak = max(counts.values(), default=0) or 1
        span = self.WIDTH - self.LABEL_WIDTH - 50
        self.bars = [
            {
                "status": status,
                "label": GenerationJob.Status(status).label,
                "count": counts.get(status, 0),
                "y": index * (self.BAR_HEIGHT + self.GAP),
                "text_y": index * (self.BAR_HEIGHT + self.GAP) + self.BAR_HEIGHT - 4,
                "width": round(span * counts.get(status, 0) / peak),
                "count_x": self.LABEL_WIDTH + round(span * counts.get(status, 0) / peak) + 6,
            }
            for index, status in enumerate(GenerationJob.Status.values)
        ]
        self.height = len(self.bars) * (self.BAR_HEIGHT + self.GAP)
        self.total = sum(counts.values())


@admin.register(GenerationJob)
class GenerationJobAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "status",
        "trigger",
        "user",
        "app_name",
        "session_link",
        "attempts",
        "short_error",
        "created_at",
        "started_at",
        "finished_at",
        "duration",
        "memory_count",
    ]
    list_filter = ["status", "trigger", "app_name"]
    search_fields = ["id", "user__username", "session__id", "error"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    readonly_fields = [
        "id",
        "status",
        "trigger",
        "user",
        "app_name",
        "session",
        "attempts",
        "first_sequence",
        "last_sequence",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    ]
    fields = readonly_fields
    actions = ["retry"]
    change_list_template = "admin/memory_app/generationjob/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(memory_total=Count("memories"))

    @admin.display(description="session")
    def session_link(self, job: GenerationJob) -> str:
        if job.session_id is None:
            return "(deleted)"
        url = reverse("admin:sessions_app_sessionrecord_change", args=[quote(job.session_id)])
        return format_html('<a href="{}">{}</a>', url, Truncator(job.session_id).chars(16))

    @admin.display(description="error")
    def short_error(self, job: GenerationJob) -> str:
        return Truncator(job.error).chars(80)

    @admin.display(description="duration")
    def duration(self, job: GenerationJob) -> str:
        if job.started_at is None or job.finished_at is None:
            return "-"
        return f"{(job.finished_at - job.started_at).total_seconds():.1f} s"

    @admin.display(description="memories", ordering="memory_total")
    def memory_count(self, job: GenerationJob) -> str:
        if not job.memory_total:
            return "0"
        url = reverse("admin:memory_app_memory_changelist") + f"?job__id__exact={job.pk}"
        return format_html('<a href="{}">{}</a>', url, job.memory_total)

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.change_generationjob")

    @admin.action(description="Retry failed or dead jobs", permissions=["retry"])
    def retry(self, request, queryset):
        _apply(
            self,
            request,
            list(queryset),
            lambda job: review.memory_job_retry(
                job_id=str(job.pk), actor=request.user, path=request.get_full_path()
            ),
            done="Jobs queued again",
        )

    def changelist_view(self, request, extra_context=None):
        since = timezone.now() - timedelta(days=1)
        counts = selectors.memory_job_status_counts(since=since)
        extra = {**(extra_context or {}), "status_chart": StatusChart(counts)}
        return super().changelist_view(request, extra_context=extra)


class MemoryTopicForm(forms.ModelForm):
    class Meta:
        model = MemoryTopic
        fields = ["app_name", "key", "label", "description", "few_shot_examples", "enabled"]
        help_texts = {
            "key": (
                "A managed topic's key ("
                + ", ".join(sorted(MANAGED_TOPIC_KEYS))
                + ") overrides that topic for the app; any other key adds a custom topic."
            ),
            "few_shot_examples": (
                'A JSON list of examples: [{"text": "what the user said", '
                '"memory": "the memory to keep"}].'
            ),
        }

    def clean_few_shot_examples(self):
        examples = self.cleaned_data["few_shot_examples"]
        if examples in (None, ""):
            return []
        if not isinstance(examples, list) or not all(
            isinstance(example, dict)
            and set(example) == {"text", "memory"}
            and all(isinstance(value, str) and value.strip() for value in example.values())
            for example in examples
        ):
            raise forms.ValidationError(
                'Give a list of objects, each with exactly a "text" and a "memory" string.'
            )
        return examples


@admin.register(MemoryTopic)
class MemoryTopicAdmin(admin.ModelAdmin):
    form = MemoryTopicForm
    list_display = ["label", "key", "app_name", "managed", "enabled", "example_count"]
    list_filter = ["app_name", "managed", "enabled"]
    search_fields = ["key", "label", "description"]
    ordering = ["app_name", "-managed", "key"]

    @admin.display(description="examples")
    def example_count(self, topic: MemoryTopic) -> int:
        return len(topic.few_shot_examples or [])

    def save_model(self, request, obj, form, change):
        obj.managed = obj.key in MANAGED_TOPIC_KEYS
        super().save_model(request, obj, form, change)
