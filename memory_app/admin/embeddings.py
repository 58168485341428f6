"""Embedding tasks that gave up, read-only in the staff console: what they were to embed, by
which embedder, after how many attempts and why (``manage.py memory_embed`` catches up). And
the embedding warnings: that the embedding model failed or answered the wrong shape, once a
kind, shown on the console's home until acknowledged here or resolved."""

from __future__ import annotations

from django.contrib import admin, messages

from core.admin import ReadOnlyAdmin, console_time
from memory_app.models import EmbeddingFailure, EmbeddingWarning
from memory_app.services.embedding_warnings import embedding_warnings_acknowledge


@admin.register(EmbeddingFailure)
class EmbeddingFailureAdmin(ReadOnlyAdmin):
    list_display = ["failed_at", "embedder", "session_key", "attempts", "error"]
    list_filter = ["embedder"]
    date_hierarchy = "failed_at"
    ordering = ["-failed_at"]


@admin.register(EmbeddingWarning)
class EmbeddingWarningAdmin(ReadOnlyAdmin):
    list_display = ["kind", "embedder", "occurrences", "first", "last", "error", "closed"]
    list_filter = ["kind", ("closed_at", admin.EmptyFieldListFilter)]
    ordering = ["-last_at"]
    actions = ["acknowledge"]

    @admin.display(description="first", ordering="first_at")
    def first(self, warning: EmbeddingWarning) -> str:
        return console_time(warning.first_at)

    @admin.display(description="last", ordering="last_at")
    def last(self, warning: EmbeddingWarning) -> str:
        return console_time(warning.last_at)

    @admin.display(description="closed")
    def closed(self, warning: EmbeddingWarning) -> str:
        if warning.closed_at is None:
            return "Open"
        return f"{warning.closed_how} at {console_time(warning.closed_at)}"

    def has_acknowledge_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.change_embeddingwarning")

    @admin.action(description="Acknowledge: stop showing the warning", permissions=["acknowledge"])
    def acknowledge(self, request, queryset):
        closed = embedding_warnings_acknowledge(warnings=list(queryset), actor=request.user)
        self.message_user(
            request,
            f"{closed} warning{'s' if closed != 1 else ''} acknowledged; a new failure "
            "opens a new one.",
            messages.SUCCESS,
        )
