from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password-change-me"


class Command(BaseCommand):
    help = "Create the demo user if it does not exist, and print how to sign in."

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError(
                "No demo user with production settings: its password is public. "
                "Create accounts with `manage.py createsuperuser` or the sign-up page."
            )
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=DEMO_USERNAME)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo user: username {DEMO_USERNAME!r}, password {DEMO_PASSWORD!r}"
                + ("" if created else " (already existed; password left as it was)")
            )
        )
