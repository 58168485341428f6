"""Memories a person or an app adds directly: the Memory page's form stores the person's
explicit statement, its history saying "added on the Memory page"; one added over MCP or the
service API names the token or key that added it."""

import json

import pytest
from django.test import Client

from agents_app.mcp_server import Principal, _added_by
from agents_app.services import app_ensure, service_account_create
from memory_app.models import Memory, MemoryRevision, SourceType
from tests.factories import UserFactory
from tests.memory_app.support import lexical_only  # noqa: F401 (fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]


@pytest.fixture
def browser_client(user):
    client = Client()
    client.force_login(user)
    return client


def created_reason(memory):
    return MemoryRevision.objects.get(memory=memory, action=MemoryRevision.Action.CREATED).reason


def test_the_memory_page_adds_an_explicit_statement(browser_client, user):
    page = browser_client.get("/memory/")
    assert b"Add a memory" in page.content

    answer = browser_client.post(
        "/memory/add/", {"text": "I'm allergic to peanuts.", "topic": "personal_info"}
    )

    assert answer.status_code == 302
    memory = Memory.objects.get(user=user)
    assert "allergic to peanuts" in memory.text
    assert memory.source_type == SourceType.EXPLICIT
    assert memory.topic == "personal_info"
    assert created_reason(memory) == "added on the Memory page"
    shown = browser_client.get("/memory/").content.decode()
    assert "added on the Memory page" in shown


def test_the_form_refuses_what_it_cannot_keep_and_keeps_nothing(browser_client, user):
    assert browser_client.post("/memory/add/", {"text": "  "}).status_code == 302
    assert browser_client.post("/memory/add/", {"text": "x" * 1001}).status_code == 302
    browser_client.post("/memory/add/", {"text": "I live in Lisbon.", "topic": "<script>"})
    assert list(Memory.objects.filter(user=user).values_list("topic", flat=True)) != ["<script>"]
    assert Memory.objects.filter(user=user).count() == 1
    assert browser_client.get("/memory/add/").status_code == 405
    assert Client().post("/memory/add/", {"text": "I live in Porto."}).status_code == 302
    assert Memory.objects.filter(user=user).count() == 1


def test_a_memory_added_through_the_api_names_the_key():
    app, _ = app_ensure(name="support")
    account = service_account_create(app=app, name="crm-sync")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {account.key}")

    answer = client.post(
        "/api/v1/apps/support/users/ada/memories/",
        json.dumps({"text": "Prefers e-mail over phone calls."}),
        content_type="application/json",
    )

    assert answer.status_code == 201, answer.content
    memory = Memory.objects.get(app_name="support")
    reason = created_reason(memory)
    assert reason.startswith("added through the API by the service account \u201ccrm-sync\u201d")
    assert account.record.prefix in reason


def test_a_memory_added_over_mcp_names_the_token_or_the_key():
    from access_app.models import PersonalAccessToken

    owner = UserFactory()
    token, _ = PersonalAccessToken.objects.create_key(name="laptop", user=owner)
    app, _ = app_ensure(name="support")
    account = service_account_create(app=app, name="bot")

    by_token = Principal(app_name="chat", user_pk=owner.pk, can_write=True, token=token)
    by_key = Principal(app_name="support", user_pk=None, can_write=True, key=account.record)

    assert _added_by(by_token) == "added over MCP with your token \u201claptop\u201d"
    assert _added_by(by_key) == (
        f"added over MCP by the service account \u201cbot\u201d (key {account.record.prefix})"
    )
