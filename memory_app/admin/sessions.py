"""The sessions admin with long-term memory's action: re-run memory generation for the selected
sessions. The session store's admin knows nothing of memory; this app registers its subclass in
its place."""

from __future__ import annotations

from django.contrib import admin

from memory_app.admin.actions import sessions_regenerate
from sessions_app import admin as sessions_admin
from sessions_app.models import SessionRecord


class SessionRecordAdmin(sessions_admin.SessionRecordAdmin):
    actions = ["regenerate_memories"]

    def has_regenerate_permission(self, request) -> bool:
        return request.user.has_perm("memory_app.add_generationjob")

    @admin.action(description="Re-run memory generation", permissions=["regenerate"])
    def regenerate_memories(self, request, queryset):
        return sessions_regenerate(self, request, list(queryset.values_list("pk", flat=True)))


admin.site.unregister(SessionRecord)
admin.site.register(SessionRecord, SessionRecordAdmin)
