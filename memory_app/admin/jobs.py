"""Generation jobs in the staff console: the read-only list with a chart of the last day's jobs
by status, and the retry action."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from core.admin import ReadOnlyAdmin, console_time
from memory_app import selectors
from memory_app.admin.actions import _apply
from memory_app.models import GenerationJob
from memory_app.services import review


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
    # One time column (the link to the job), a short session id and the attempts told with the
    # status keep the table within the console at 1280 px, beside the navigation and the
    # filters (the app and the trigger are among those); a job's page has every field in full.
    list_display = [
        "created",
        "status_shown",
        "user",
        "session_link",
        "duration",
        "memory_count",
        "short_error",
    ]
    list_display_links = ["created"]
    list_filter = ["status", "trigger", "app_name"]
    search_fields = ["id", "user__username", "session__session_id", "error"]
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
        "retry_at",
    ]
    fields = readonly_fields
    actions = ["retry"]
    change_list_template = "admin/memory_app/generationjob/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(memory_total=Count("memories"))

    @admin.display(description="status", ordering="status")
    def status_shown(self, job: GenerationJob) -> str:
        """The status, and for a queued job whose last attempt failed on an error that passes
        (its model server down) that it waits to retry and until when, rather than a plain
        "Queued" that looks stuck."""
        if job.status == GenerationJob.Status.QUEUED and job.attempts and job.error:
            attempts = f"{job.attempts} attempt{'s' if job.attempts > 1 else ''} failed"
            if job.retry_at is None:
                return f"Waiting to retry ({attempts})"
            return f"Waiting to retry ({attempts}; next at {console_time(job.retry_at)})"
        if job.attempts <= 1:
            return job.get_status_display()
        return f"{job.get_status_display()} after {job.attempts} attempts"

    @admin.display(description="session")
    def session_link(self, job: GenerationJob) -> str:
        if job.session_id is None:
            return "(deleted)"
        url = reverse("admin:sessions_app_sessionrecord_change", args=[quote(job.session_id)])
        return format_html(
            '<a href="{}" title="{}">{}</a>',
            url,
            job.session_id,
            Truncator(job.session_id).chars(9),
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, job: GenerationJob) -> str:
        return console_time(job.created_at)

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
