"""Embedding tasks that gave up, read-only in the staff console: what they were to embed, by
which embedder, after how many attempts and why (``manage.py memory_embed`` catches up)."""

from __future__ import annotations

from django.contrib import admin

from core.admin import ReadOnlyAdmin
from memory_app.models import EmbeddingFailure


@admin.register(EmbeddingFailure)
class EmbeddingFailureAdmin(ReadOnlyAdmin):
    list_display = ["failed_at", "embedder", "session_key", "attempts", "error"]
    list_filter = ["embedder"]
    date_hierarchy = "failed_at"
    ordering = ["-failed_at"]
