"""``python manage.py app_key_create --app NAME [--scopes ...]``: an API key for scripts.

Creates the app if it does not exist (open to every signed-in user), a service account of it,
and a key with every scope unless ``--scopes`` narrows them; prints the key alone on its last
line (it is shown this once and stored only hashed).
"""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from agents_app.models import ALL_SCOPES
from agents_app.services import AppError, app_ensure, service_account_create


class Command(BaseCommand):
    help = "Create an API key of a service account of an app (the app too, if missing)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--app", required=True, help="The app's name.")
        parser.add_argument(
            "--scopes", nargs="+", choices=ALL_SCOPES, help="Scopes of the key (default: all)."
        )
        parser.add_argument("--name", help="The service account's name (default: a new one).")
        parser.add_argument("--expires-days", type=int, help="Days until the key expires.")

    def handle(self, *args, app: str, scopes, name, expires_days, **options) -> None:
        try:
            record, created = app_ensure(name=app)
        except ValidationError as error:
            raise CommandError("; ".join(error.messages)) from None
        if created:
            self.stderr.write(f"Created the app {app!r}, open to every signed-in user.")
        account_name = name or f"key-{timezone.now():%Y%m%d%H%M%S%f}"
        expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
        try:
            issued = service_account_create(
                app=record, name=account_name, scopes=scopes, expires_at=expires_at
            )
        except AppError as error:
            raise CommandError(str(error)) from None
        self.stderr.write(
            f"Service account {account_name!r} of {app!r}, key prefix {issued.record.prefix}, "
            f"scopes {', '.join(issued.record.scopes)}. The key (shown once):"
        )
        self.stdout.write(issued.key)
