"""Apps as registered records: sessions only in apps that exist and that the caller may use,
the chat page's picker, the agent read from the app at every turn, the seeding migration."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.test import Client

from agents_app.models import App
from agents_app.runtime.agents import agent_for_app
from agents_app.selectors import apps_usable_by
from agents_app.services import end_user_ensure
from sessions_app.models import SessionRecord
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _create(client: Client, app_name: str):
    return client.post(
        "/api/sessions/", json.dumps({"app_name": app_name}), content_type="application/json"
    )


def test_the_default_app_exists_after_migrate_open_to_everyone(user):
    assert App.objects.get(name="chat").open_to_all
    assert list(apps_usable_by(user=user).values_list("name", flat=True)) == ["chat"]


def test_a_session_in_an_unknown_app_is_refused_with_404(api_client):
    answer = _create(api_client, "support")
    assert answer.status_code == 404
    assert answer.json() == {"detail": "There is no app named 'support'."}
    assert not SessionRecord.objects.exists()


def test_a_group_only_app_refuses_others_with_403_and_admits_members(api_client, user):
    app = App.objects.create(name="support", open_to_all=False)
    staff_group = Group.objects.create(name="support agents")
    app.allowed_groups.add(staff_group)

    refused = _create(api_client, "support")
    assert refused.status_code == 403
    assert refused.json() == {"detail": "You may not use the app 'support'."}

    user.groups.add(staff_group)
    assert _create(api_client, "support").status_code == 201
    assert SessionRecord.objects.get().app_name == "support"


def test_an_end_user_account_uses_no_app_in_the_browser():
    app = App.objects.create(name="support")
    end_user = end_user_ensure(app=app, external_id="alice")
    assert list(apps_usable_by(user=end_user.user)) == []
    client = Client()
    client.force_login(end_user.user)
    assert _create(client, "support").status_code == 403


def test_the_chat_page_offers_a_picker_only_with_more_than_one_app(user):
    client = Client()
    client.force_login(user)
    page = client.get("/")
    assert 'id="app-picker"' not in page.content.decode()
    [only] = page.context["chat_config"]["apps"]
    assert only == {
        "name": "chat",
        "title": "chat",
        "model": "offline (built in, no network)",
        "offline": True,
    }

    App.objects.create(name="support", title="Support desk")
    App.objects.create(name="staffonly", open_to_all=False)
    page = client.get("/").content.decode()
    assert 'id="app-picker"' in page
    assert "Support desk" in page
    assert "staffonly" not in page


def test_the_agent_is_read_from_its_app_so_a_change_applies_at_once():
    App.objects.create(name="support", instruction="Be brief, {user:name?}.", output_key="last")
    assert agent_for_app("support").instruction == "Be brief, {user:name?}."
    App.objects.filter(name="support").update(instruction="Be kind.", tools=[], max_steps=2)
    agent = agent_for_app("support")
    assert (agent.instruction, agent.tools, agent.max_steps, agent.output_key) == (
        "Be kind.",
        (),
        2,
        "last",
    )


def test_the_seeding_migration_turns_every_app_name_in_use_into_an_app(settings):
    settings.AGENTS = {"helpdesk": {"instruction": "Help.", "tools": []}}
    settings.MEMORY_PII_REDACTION = {"legal": True}
    settings.MEMORY_TRIGGERS = {"legal": {"every_turn": True}}
    owner = UserFactory()
    SessionRecord.objects.create(session_id="s1", app_name="legal", user=owner, last_update_time=0)
    App.objects.filter(name="chat").update(title="kept")
    migration = importlib.import_module("agents_app.migrations.0003_apps_from_names_in_use")

    migration.apps_create(django_apps, None)

    apps = {app.name: app for app in App.objects.all()}
    assert set(apps) == {"chat", "helpdesk", "legal"}
    assert apps["chat"].title == "kept"
    assert apps["helpdesk"].instruction == "Help." and apps["helpdesk"].tools == []
    assert apps["legal"].pii_redaction and apps["legal"].trigger_every_turn is True


def test_a_closed_app_refuses_every_write_to_a_session_in_it_and_allows_reads(api_client, user):
    app = App.objects.create(name="support")
    created = _create(api_client, "support").json()
    session = f"/api/sessions/{created['id']}/"
    event = {"author": "user", "content": {"role": "user", "parts": [{"text": "Hi."}]}}
    assert api_client.post(f"{session}events/", event, format="json").status_code == 201

    app.open_to_all = False
    app.save()
    writes = {
        "append": api_client.post(f"{session}events/", event, format="json"),
        "rename": api_client.patch(session, {"title": "Mine"}, format="json"),
        "rewind": api_client.post(f"{session}rewind/", {"invocation_id": "x"}, format="json"),
    }

    assert {door: answer.status_code for door, answer in writes.items()} == dict.fromkeys(
        writes, 403
    )
    assert writes["append"].json() == {"detail": "You may not use the app 'support'."}
    assert [e["author"] for e in api_client.get(f"{session}events/").json()["results"]] == ["user"]
    assert api_client.delete(session).status_code == 204
