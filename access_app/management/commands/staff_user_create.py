from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from access_app.services import ROLES, staff_user_create


class Command(BaseCommand):
    help = (
        "Create a staff account for the staff console (/admin/) with a role, or give an existing "
        "account the role: reviewer (Memory reviewers: read memories with their provenance and "
        "decide on quarantined ones), admin (Memory admins: every permission of the memory, "
        "session and agent apps and of the schedules, but making service accounts and keys) or "
        "keys (Key managers: make and change service accounts, issue and revoke their keys, "
        "each audited). A new account's password is printed once."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--role",
            choices=[*ROLES, "none"],
            default="reviewer",
            help="reviewer (default), admin, keys, or none (sees only what users grant it)",
        )
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="give an existing account a new random password, printed once",
        )

    def handle(self, *args, username, role, reset_password, **options):
        try:
            result = staff_user_create(
                username=username,
                role=None if role == "none" else role,
                reset_password=reset_password,
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        held = ROLES.get(role, "no role: only what users grant it")
        verb = "Created" if result.created else "Updated"
        self.stdout.write(
            self.style.SUCCESS(f"{verb} staff account {result.user.get_username()!r} ({held}).")
        )
        if result.password:
            self.stdout.write(f"Password: {result.password}")
        else:
            self.stdout.write("Password left as it was (--reset-password sets a new one).")
        self.stdout.write("Sign in to the staff console at /admin/.")
