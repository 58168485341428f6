"""A model of one's own (issue 29), end to end on the embedded default (SQLite, in-process
tasks): with ``LLM_PROVIDER=openai`` pointed at a local OpenAI-compatible server (the fake one,
answering as a small assistant would: ``tests.fake_openai.conversation_reply``), a chat in the
browser streams the model's reply, "remember ..." becomes a memory through the model's fact
extraction and consolidation, a correction updates it, compaction stores the model's summary,
and ``memory_eval locomo --answer-model --judge-model`` prints a J score from the same server.
The chat page names the model of the app picked, the offline model's banner for an app on it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.browser.server import BIN, ROOT, Server, running_server, sign_in
from tests.browser.test_memory import replies, send
from tests.fake_openai import FakeOpenAI, conversation_reply
from tests.memory_app.test_answer_eval import CONVERSATION

pytestmark = pytest.mark.browser

GENERATION_TIMEOUT_SECONDS = 45
MEMORIES = """
from memory_app.models import Memory
for memory in Memory.objects.filter(user__username="reader-00", status="active"):
    print(json.dumps([memory.text, list(memory.revisions.values_list("reason", flat=True))]))
"""


@pytest.fixture(scope="module")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(responder=conversation_reply).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def local_server(tmp_path_factory, fake_openai_server) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("daphne-local-model"),
        extra_env={
            "LLM_PROVIDER": "openai",
            "OPENAI_BASE_URL": fake_openai_server.url,
            "LLM_MODEL": "llama3.2",
            "MEMORY_EMBEDDER": "openai",
            "MEMORY_OPENAI_EMBEDDING_MODEL": "nomic-embed-text",
            "MEMORY_TRIGGER_EVERY_TURN": "true",
            "NO_PROXY": "127.0.0.1,localhost",
        },
    ) as running:
        running.shell(
            "from agents_app.models import App\n"
            "from agents_app.services import app_ensure\n"
            "app_ensure(name='chat')\n"
            "App.objects.filter(name='chat').update("
            "keep_last_invocations=1, summarize_after_invocations=1)\n"
        )
        yield running


def _memories(server: Server) -> list[list]:
    output = server.shell("import json\n" + MEMORIES)
    return [json.loads(line) for line in output.splitlines() if line.startswith("[")]


def _wait_for(check, what: str):
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.5)
    return found


def test_a_local_model_chats_remembers_corrects_summarises_and_is_judged(
    browser, local_server: Server, fake_openai_server: FakeOpenAI, tmp_path
):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page: Page = context.new_page()
    sign_in(page, local_server, "reader-00")
    expect(page.get_by_role("note")).to_contain_text(
        "Replies come from llama3.2 (OpenAI-compatible server)"
    )

    send(page, "Remember that my favourite colour is green.")
    expect(replies(page).last).to_have_text("You said: Remember that my favourite colour is green.")
    [chat] = [r for r in fake_openai_server.requests if r.body.get("stream")]
    assert chat.body["model"] == "llama3.2"
    assert {"load_memory", "create_memory"} <= set(chat.tool_names())

    [[text, reasons]] = _wait_for(lambda: _memories(local_server), "a memory of the green colour")
    assert "favourite colour is green" in text
    assert "Something new." in reasons  # the model's consolidation created it

    send(page, "Actually my favourite colour is blue.")
    corrected = _wait_for(
        lambda: [m for m in _memories(local_server) if "blue" in m[0]], "the correction"
    )
    assert [m[0] for m in _memories(local_server)] == [corrected[0][0]]
    assert "You corrected it." in corrected[0][1]  # the model's UPDATE
    embedded = [r for r in fake_openai_server.requests if r.path.endswith("/embeddings")]
    assert embedded and embedded[0].body["model"] == "nomic-embed-text"

    session_id = urlsplit(page.url).path.rstrip("/").rsplit("/", 1)[-1]
    summary = _wait_for(
        lambda: (
            local_server.shell(
                "from django.contrib.auth import get_user_model\n"
                "from sessions_app import selectors\n"
                "user = get_user_model().objects.get(username='reader-00')\n"
                "event = selectors.session_latest_compaction(\n"
                f"    app_name='chat', user_pk=user.pk, session_id={session_id!r}\n"
                ")\n"
                "if event:\n"
                "    print('summary:', event.actions.compaction.compacted_content.parts[0].text)\n"
            )
            .partition("summary: ")[2]
            .strip()
        ),
        "a compaction",
    )
    assert summary == "Summary: the user talked about their plans."
    context.close()

    locomo = tmp_path / "tiny.json"
    locomo.write_text(json.dumps(CONVERSATION))
    done = subprocess.run(
        [
            *[str(BIN / "python"), str(ROOT / "manage.py"), "memory_eval", "locomo", str(locomo)],
            *["--answer-model", "llama3.2", "--judge-model", "qwen2.5", "--json"],
        ],
        env=local_server.env,
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(done.stdout)
    assert result["j_score"] == 1.0
    assert (result["answer_model"], result["judge_model"]) == ("llama3.2", "qwen2.5")
    assert result["extraction"] == "openai"
    judged = [r for r in fake_openai_server.requests if r.body.get("model") == "qwen2.5"]
    assert len(judged) == result["questions"] == 2


def test_the_chat_page_names_the_model_of_the_app_picked(browser, local_server: Server):
    local_server.shell(
        "from agents_app.models import App\n"
        "App.objects.get_or_create(name='notes', defaults={'title': 'Notes', "
        "'provider': 'offline'})\n"
    )
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page: Page = context.new_page()
    sign_in(page, local_server, "reader-01")
    served, offline = page.locator("#model-banner"), page.locator("#offline-banner")
    expect(served).to_have_text("Replies come from llama3.2 (OpenAI-compatible server).")
    expect(offline).to_be_hidden()

    page.get_by_label("Agent").select_option("notes")
    expect(offline).to_be_visible()
    expect(offline).to_contain_text("Offline model.")
    expect(served).to_be_hidden()

    page.get_by_label("Agent").select_option("chat")
    expect(served).to_have_text("Replies come from llama3.2 (OpenAI-compatible server).")
    expect(offline).to_be_hidden()
    context.close()
