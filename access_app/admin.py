"""Read-only console pages of the access layer: the staff access log and the grants users gave.

For whoever answers for staff access (the "Memory admins" role holds both view
permissions): who looked at or changed whose data, when and why, and which
grants are open. Nothing here is editable; grants change only by their owners.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from access_app.models import AccessGrant, AuditLogEntry
from core.admin import ReadOnlyAdmin


@admin.register(AuditLogEntry)
class AuditLogEntryAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "actor_username",
        "action",
        "subject_user",
        "object_type",
        "object_id",
        "reason",
    ]
    list_filter = ["action", "object_type"]
    search_fields = ["actor_username", "subject_user__username", "object_id", "reason"]
    list_select_related = ["subject_user"]
    date_hierarchy = "created_at"
    fields = [
        "created_at",
        "actor",
        "actor_username",
        "subject_user",
        "action",
        "object_type",
        "object_id",
        "reason",
        "path",
    ]
    readonly_fields = fields


class ActiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("ended", "Revoked or expired")]

    def queryset(self, request, queryset):
        active = {"revoked_at__isnull": True, "expires_at__gt": timezone.now()}
        if self.value() == "active":
            return queryset.filter(**active)
        if self.value() == "ended":
            return queryset.exclude(**active)
        return queryset


@admin.register(AccessGrant)
class AccessGrantAdmin(ReadOnlyAdmin):
    list_display = ["owner", "grantee", "scope", "created_at", "expires_at", "revoked_at"]
    list_filter = [ActiveFilter, "scope"]
    search_fields = ["owner__username", "grantee__username"]
    list_select_related = ["owner", "grantee"]
    fields = ["owner", "grantee", "scope", "created_at", "expires_at", "revoked_at"]
    readonly_fields = fields
