"""The admin base the apps share; the models' admins live in their apps."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """An admin that shows rows and never writes them: changes go through the apps' services,
    called by admin actions, so that each one is revised and audited."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
