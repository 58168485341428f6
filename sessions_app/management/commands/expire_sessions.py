import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions_app import services
from sessions_app.models import SessionRecord


class Command(BaseCommand):
    help = (
        "Delete sessions idle longer than SESSION_IDLE_TTL_SECONDS, with their events and "
        "state: the same work as the periodic task, on demand."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Only print how many sessions would be deleted.",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Sessions deleted per transaction (default: SESSION_CLEANUP_BATCH_SIZE).",
        )

    def handle(self, *args, dry_run: bool, batch_size: int | None, **options):
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        ttl = settings.SESSION_IDLE_TTL_SECONDS
        if ttl <= 0:
            self.stdout.write("SESSION_IDLE_TTL_SECONDS is 0: sessions never expire.")
            return
        if dry_run:
            idle = SessionRecord.objects.filter(last_update_time__lt=time.time() - ttl).count()
            self.stdout.write(f"{idle} idle session(s) would be deleted (TTL {ttl} s).")
            return
        deleted = services.sessions_expire_idle(batch_size=batch_size)
        self.stdout.write(self.style.SUCCESS(f"Deleted {deleted} idle session(s) (TTL {ttl} s)."))
