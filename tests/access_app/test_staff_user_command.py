"""`manage.py staff_user_create` (and `make staff-user`): a staff account with a role, in one
step, that can then sign in to the console and do what the role allows."""

from __future__ import annotations

import re
import subprocess
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from access_app.services import ADMINS_GROUP, KEY_MANAGERS_GROUP, REVIEWERS_GROUP
from tests.factories import MemoryFactory, UserFactory


def create(*arguments: str) -> str:
    out = StringIO()
    call_command("staff_user_create", *arguments, stdout=out)
    return out.getvalue()


def printed_password(output: str) -> str:
    return re.search(r"^Password: (\S+)$", output, re.MULTILINE).group(1)


def signs_in(client: Client, username: str, password: str) -> bool:
    """Sign in through the console's form, as a person does (the sign-in guard, django-axes,
    needs the request that ``Client.login`` does not give)."""
    response = client.post("/admin/login/", {"username": username, "password": password})
    return response.status_code == 302


def roles(username: str) -> list[str]:
    user = get_user_model().objects.get(username=username)
    return sorted(user.groups.values_list("name", flat=True))


@pytest.mark.django_db
def test_a_new_reviewer_signs_in_with_the_printed_password_and_reads_memories():
    MemoryFactory(user=UserFactory(), text="The user is allergic to peanuts.")

    output = create("ines", "--role", "reviewer")

    assert "Created staff account 'ines' (Memory reviewers)." in output
    client = Client()
    assert signs_in(client, "ines", printed_password(output))
    page = client.get("/admin/memory_app/memory/")
    assert page.status_code == 200
    assert "allergic to peanuts" in page.content.decode()
    assert roles("ines") == [REVIEWERS_GROUP]


@pytest.mark.django_db
def test_an_admin_role_and_the_default_role():
    create("amal", "--role", "admin")
    create("rui")

    assert roles("amal") == [ADMINS_GROUP]
    assert roles("rui") == [REVIEWERS_GROUP]
    assert get_user_model().objects.get(username="amal").is_staff


@pytest.mark.django_db
def test_a_key_manager_makes_service_accounts_and_reads_no_memories():
    MemoryFactory(user=UserFactory(), text="The user is allergic to peanuts.")

    output = create("kim", "--role", "keys")

    assert "Created staff account 'kim' (Key managers)." in output
    client = Client()
    assert signs_in(client, "kim", printed_password(output))
    assert client.get("/admin/agents_app/serviceaccount/add/").status_code == 200
    assert client.get("/admin/memory_app/memory/").status_code == 403
    assert roles("kim") == [KEY_MANAGERS_GROUP]


@pytest.mark.django_db
def test_an_existing_account_gets_the_role_instead_of_its_old_one_and_keeps_its_password():
    account = UserFactory(username="noor")
    account.set_password("her-own-password")
    account.save()
    create("noor", "--role", "keys")

    output = create("noor", "--role", "reviewer")

    assert "Updated staff account 'noor' (Memory reviewers)." in output
    assert "Password left as it was" in output
    assert roles("noor") == [REVIEWERS_GROUP]
    assert signs_in(Client(), "noor", "her-own-password")


@pytest.mark.django_db
def test_a_role_can_be_taken_away_and_a_password_reset():
    create("lea", "--role", "admin")

    output = create("lea", "--role", "none", "--reset-password")

    assert roles("lea") == []
    assert signs_in(Client(), "lea", printed_password(output))


@pytest.mark.django_db
def test_an_unknown_role_is_refused():
    with pytest.raises(CommandError, match="invalid choice"):
        create("sam", "--role", "owner")
    assert not get_user_model().objects.filter(username="sam").exists()


def test_make_staff_user_runs_the_command_after_migrating():
    planned = subprocess.run(
        ["make", "-n", "staff-user", "STAFF=ines", "ROLE=admin"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert "manage.py migrate" in planned
    assert "manage.py staff_user_create 'ines' --role 'admin'" in planned


def test_make_staff_user_without_a_name_says_how_to_call_it():
    refused = subprocess.run(
        ["make", "-n", "staff-user"], cwd=settings.BASE_DIR, capture_output=True, text=True
    )

    assert refused.returncode != 0
    assert "make staff-user STAFF=<username>" in refused.stderr
