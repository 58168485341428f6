from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _roles_after_migrate(sender, using, **kwargs) -> None:
    """Keep the staff roles complete after every migrate (permissions exist only by then)."""
    from access_app.services import roles_ensure

    roles_ensure()


class AccessAppConfig(AppConfig):
    name = "access_app"
    verbose_name = "Access control"

    def ready(self) -> None:
        """Register the object permissions and the role upkeep.

        The app comes after memory_app and sessions_app in INSTALLED_APPS, so when its
        post_migrate runs, their permissions have been created.
        """
        from access_app.permissions import rules_register

        rules_register()
        post_migrate.connect(_roles_after_migrate, sender=self, dispatch_uid="access-roles")
