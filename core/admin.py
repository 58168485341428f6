"""The admin base the apps share; the models' admins live in their apps."""

from datetime import datetime

from django.contrib import admin
from django.utils import formats, timezone


def console_time(moment: datetime | None) -> str:
    """A time in a list of the console: short enough to share a row with many columns."""
    if moment is None:
        return "-"
    return formats.date_format(timezone.localtime(moment), "Y-m-d H:i")


class ReadOnlyAdmin(admin.ModelAdmin):
    """An admin that shows rows and never writes them: changes go through the apps' services,
    called by admin actions, so that each one is revised and audited."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
