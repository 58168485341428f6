from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from access_app.services import TOKEN_SCOPES, access_token_create


class Command(BaseCommand):
    help = (
        "Make a personal access token with which a person's own assistant reaches their memory "
        "over MCP (/mcp/). The token is printed once, alone on the last line; only its hash is "
        "kept. It can be revoked on the Settings page."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the username of the token's owner")
        parser.add_argument(
            "--scopes",
            nargs="+",
            choices=TOKEN_SCOPES,
            default=["read"],
            help="read (default: search and list memories) and/or write (add, correct, delete)",
        )
        parser.add_argument(
            "--expires", type=int, metavar="DAYS", help="days until it expires (default: never)"
        )
        parser.add_argument("--name", default="MCP", help="a name to recognise it by")

    def handle(self, *args, user, scopes, expires, name, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"There is no user {user!r}.")
        try:
            issued = access_token_create(
                user=owner, name=name, scopes=scopes, expires_in_days=expires
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        record = issued.record
        until = (
            f"until {record.expiry_date:%Y-%m-%d %H:%M %Z}" if record.expiry_date else "no expiry"
        )
        self.stdout.write(
            f"Token {record.name!r} ({record.prefix}) of {user!r}: {', '.join(record.scopes)}, "
            f"{until}. It is shown only now:"
        )
        self.stdout.write(issued.token)
