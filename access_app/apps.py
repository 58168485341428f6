from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_migrate, post_save


def _account_name_record(sender, instance, raw=False, **kwargs) -> None:
    if raw:
        return
    from access_app.services import account_name_record

    account_name_record(user=instance)


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
        from axes.signals import user_locked_out
        from django.contrib.auth.signals import user_logged_out

        from access_app.permissions import rules_register
        from access_app.signin import user_locked_out_receiver
        from access_app.signin_end import (
            user_deleted_receiver,
            user_logged_out_receiver,
            user_saved_receiver,
        )

        rules_register()
        user_locked_out.connect(user_locked_out_receiver, dispatch_uid="access-lockout-audit")
        post_save.connect(
            _account_name_record,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="access-account-name",
        )
        post_migrate.connect(_roles_after_migrate, sender=self, dispatch_uid="access-roles")
        # A sign-in that ends closes the user's open chat sockets (access_app.signin_end).
        user_logged_out.connect(user_logged_out_receiver, dispatch_uid="access-signin-end-logout")
        post_save.connect(
            user_saved_receiver, sender=settings.AUTH_USER_MODEL, dispatch_uid="access-signin-end"
        )
        post_delete.connect(
            user_deleted_receiver,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="access-signin-end-delete",
        )
