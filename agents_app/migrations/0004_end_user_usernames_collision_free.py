"""End users' accounts get usernames no other app's end user can take (issue 27).

They were named ``<app>:<id>`` (or the app cut short and a digest of the id alone when that
was too long), so ``colx`` with ``y:z`` and ``colx:y`` with ``z`` wanted one name and the second
could never be made. Each account made that way is renamed to the form
``agents_app.services.end_user_username`` makes now (the readable name cut to fit, ``~`` and a
digest of the app's id and the external id); an account staff linked to an end user keeps its
name. Only usernames change: every end user, account and row keyed on it stays as it was.
"""

import hashlib
import json

from django.db import migrations

USERNAME_MAX = 150
DIGEST_CHARS = 32


def _former_username(app_name: str, external_id: str) -> str:
    username = f"{app_name}:{external_id}"
    if len(username) <= USERNAME_MAX:
        return username
    digest = hashlib.sha256(external_id.encode()).hexdigest()[:40]
    return f"{app_name[: USERNAME_MAX - len(digest) - 2]}:~{digest}"


def _username(app_pk: int, app_name: str, external_id: str) -> str:
    digest = hashlib.sha256(json.dumps([app_pk, external_id]).encode()).hexdigest()
    digest = digest[:DIGEST_CHARS]
    return f"{f'{app_name}:{external_id}'[: USERNAME_MAX - len(digest) - 1]}~{digest}"


def end_user_accounts_rename(apps, schema_editor) -> None:
    """Rename every account made for an end user under the former scheme."""
    end_users = apps.get_model("agents_app", "EndUser").objects.select_related("app", "user")
    for end_user in end_users.order_by("pk").iterator():
        account = end_user.user
        if account.username != _former_username(end_user.app.name, end_user.external_id):
            continue
        account.username = _username(end_user.app.pk, end_user.app.name, end_user.external_id)
        account.save(update_fields=["username"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0003_apps_from_names_in_use"),
    ]

    operations = [
        migrations.RunPython(end_user_accounts_rename, migrations.RunPython.noop, elidable=True),
    ]
