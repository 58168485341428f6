"""The chat page in a real browser against a real daphne: what a user sees and can do."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from tests.browser.server import WEBSOCKET_MAX_MESSAGE_BYTES

pytestmark = pytest.mark.browser

NICE_TO_MEET_ADA = "Nice to meet you, Ada! I'll call you that in all your chats."

RECORD_REPLY_TEXTS = """() => {
  window.replyTexts = [];
  const messages = document.getElementById("messages");
  new MutationObserver(() => {
    for (const body of messages.querySelectorAll(".entry-agent .bubble-body")) {
      window.replyTexts.push(body.textContent);
    }
  }).observe(messages, { childList: true, subtree: true, characterData: true });
}"""


# Its reply streams in several pieces, so that one shows before the next even when a busy
# machine makes the page late.
MESSAGE = "Hello there, how are you on this fine and sunny morning"


def send(page: Page, text: str) -> None:
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")


def user_messages(page: Page):
    return page.locator("#messages .entry-user .bubble-body")


def replies(page: Page):
    return page.locator("#messages .entry-agent .bubble-body")


def state_panel(page: Page):
    return page.get_by_role("complementary", name="State and context")


def test_a_reply_streams_in_and_the_conversation_is_there_after_a_reload(chat_page: Page):
    page = chat_page
    expect(page.get_by_role("note")).to_contain_text("Offline model")
    page.evaluate(RECORD_REPLY_TEXTS)

    send(page, MESSAGE)

    expect(user_messages(page)).to_have_text([MESSAGE])
    final = f"You said: \u201c{MESSAGE}\u201d."
    expect(replies(page)).to_have_text([final])
    seen = [text.strip() for text in page.evaluate("window.replyTexts")]
    partial = [text for text in seen if text and text != final]
    assert partial, f"no partial reply was shown before the final one: {seen}"
    assert all(final.startswith(text) for text in partial), seen
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    expect(page).to_have_url(re.compile(r"/chat/[^/]+/$"))

    page.reload()

    expect(user_messages(page)).to_have_text([MESSAGE])
    expect(replies(page)).to_have_text([final])
    expect(page.get_by_role("heading", level=1)).to_have_text(MESSAGE)


def test_shift_enter_starts_a_new_line_and_enter_sends(chat_page: Page):
    page = chat_page
    composer = page.get_by_role("textbox", name="Message")
    composer.type("first line")
    composer.press("Shift+Enter")
    composer.type("second line")
    expect(user_messages(page)).to_have_count(0)

    composer.press("Enter")

    expect(user_messages(page)).to_have_text(["first line\nsecond line"])
    expect(composer).to_be_focused()


def test_state_panel_shows_the_name_the_agent_saved_and_what_the_model_got(chat_page: Page):
    page = chat_page
    panel = state_panel(page)
    toggle = page.get_by_role("button", name="State & context")
    toggle.click()
    expect(panel).to_be_hidden()
    toggle.click()
    expect(panel).to_be_visible()

    send(page, "my name is Ada")

    expect(replies(page).last).to_have_text(NICE_TO_MEET_ADA)
    expect(page.locator("#messages .tool-step summary")).to_have_text("Saved your name")
    user_scope = panel.locator("[data-scope=user]")
    expect(user_scope.locator(".state-row")).to_have_text(["user:nameAda"])
    expect(panel.locator("[data-scope=session]")).to_contain_text("No keys.")
    context = panel.locator("#context-view")
    expect(context).to_contain_text("offline")
    expect(context.locator(".context-row", has_text="Events in context")).to_contain_text(
        re.compile(r"\d+")
    )

    send(page, "How are you?")

    expect(replies(page).last).to_have_text("Hi Ada! You said: \u201cHow are you?\u201d")


def test_new_chat_rename_and_delete_from_the_session_list(chat_page: Page):
    page = chat_page
    sessions = page.get_by_role("list", name="Your chats").get_by_role("listitem")
    send(page, "First chat")
    expect(sessions).to_have_text([re.compile("^First chat")])

    page.get_by_role("link", name="New chat").click()

    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("New chat")
    expect(user_messages(page)).to_have_count(0)
    send(page, "Second chat")
    expect(sessions).to_have_text([re.compile("^Second chat"), re.compile("^First chat")])

    sessions.filter(has_text="First chat").hover()
    page.get_by_role("button", name="Rename \u201cFirst chat\u201d").click()
    title = page.get_by_role("textbox", name="Chat title")
    expect(title).to_be_focused()
    title.fill("Trip plans")
    title.press("Enter")
    expect(sessions).to_have_text([re.compile("^Second chat"), re.compile("^Trip plans")])
    page.get_by_role("link", name=re.compile("^Trip plans")).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Trip plans")
    expect(user_messages(page)).to_have_text(["First chat"])
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text("Trip plans")

    dialog = page.get_by_role("dialog")
    page.get_by_role("button", name="Delete \u201cSecond chat\u201d").click()
    expect(dialog).to_contain_text("\u201cSecond chat\u201d")
    dialog.get_by_role("button", name="Cancel").click()
    expect(sessions).to_have_count(2)
    page.get_by_role("button", name="Delete \u201cSecond chat\u201d").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(sessions).to_have_text([re.compile("^Trip plans")])
    page.reload()
    expect(sessions).to_have_text([re.compile("^Trip plans")])

    page.get_by_role("button", name="Delete \u201cTrip plans\u201d").click()
    dialog.get_by_role("button", name="Delete").click()

    expect(sessions).to_have_count(0)
    expect(page.get_by_text("No chats yet.")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text("New chat")
    expect(page).to_have_url(re.compile(r"/$"))


def test_the_session_list_loads_more_a_page_at_a_time(chat_page: Page):
    page = chat_page
    page.evaluate(
        """async () => {
          const token = document.querySelector('meta[name="csrf-token"]').content;
          for (let n = 0; n < 23; n++) {
            await fetch("/api/sessions/", {
              method: "POST",
              headers: { "Content-Type": "application/json", "X-CSRFToken": token },
              body: "{}",
            });
          }
        }"""
    )
    page.reload()
    sessions = page.get_by_role("list", name="Your chats").get_by_role("listitem")
    expect(sessions).to_have_count(20)

    page.get_by_role("button", name="Load more").click()

    expect(sessions).to_have_count(23)
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()
    ids = sessions.evaluate_all("items => items.map(item => item.dataset.sessionId)")
    assert len(set(ids)) == 23


def test_stop_cancels_the_reply_and_keeps_what_was_said(chat_page: Page):
    page = chat_page
    long_message = " ".join(f"word{n}" for n in range(300))
    send(page, long_message)
    expect(page.locator("#messages .entry-agent.streaming")).to_be_visible()

    page.get_by_role("button", name="Stop").click()

    reply = page.locator("#messages .entry-agent")
    expect(reply).to_contain_text("The reply was interrupted.")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    shown = replies(page).inner_text()
    assert shown.startswith("You said:")
    assert "word299" not in shown

    page.reload()

    expect(user_messages(page)).to_have_text([long_message])
    expect(reply).to_contain_text("The reply was interrupted.")
    assert "word299" not in replies(page).inner_text()


def test_retry_answers_an_interrupted_reply_once(chat_page: Page):
    page = chat_page
    long_message = " ".join(f"word{n}" for n in range(300))
    send(page, long_message)
    expect(page.locator("#messages .entry-agent.streaming")).to_be_visible()
    page.get_by_role("button", name="Stop").click()
    retry = page.get_by_role("button", name="Retry")
    expect(retry).to_be_visible()

    retry.click()

    whole = f"You said: \u201c{long_message}\u201d."
    expect(replies(page).nth(1)).to_have_text(whole, timeout=60_000)
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(retry).to_have_count(0)
    expect(page.locator("#messages .entry-agent").first).to_contain_text(
        "The reply was interrupted."
    )

    page.reload()

    expect(user_messages(page)).to_have_text([long_message])
    expect(replies(page)).to_have_count(2)
    expect(replies(page).nth(1)).to_have_text(whole)
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)


def test_a_hostile_message_is_shown_as_text(chat_page: Page):
    page = chat_page
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    hostile = "<img src=x onerror=alert(1)>"

    send(page, hostile)

    expect(user_messages(page)).to_have_text([hostile])
    expect(replies(page)).to_have_text([f"You said: \u201c{hostile}\u201d."])
    assert page.locator("#messages img").count() == 0
    page.reload()
    expect(replies(page)).to_have_text([f"You said: \u201c{hostile}\u201d."])
    assert page.locator("img").count() == 0
    assert dialogs == []


def test_a_refused_message_shows_the_error_and_gives_the_text_back(chat_page: Page):
    page = chat_page
    too_long = "a" * 8001

    send(page, too_long)

    expect(page.get_by_role("alert")).to_contain_text("at most 8000")
    expect(page.get_by_role("alert")).not_to_contain_text("message_too_large")
    expect(page.get_by_role("textbox", name="Message")).to_have_value(too_long)
    expect(user_messages(page)).to_have_count(0)
    page.get_by_role("button", name="Dismiss").click()
    expect(page.get_by_role("alert")).to_be_hidden()

    send(page, "A shorter one")

    expect(replies(page)).to_have_text(["You said: \u201cA shorter one\u201d."])


def test_a_message_of_megabytes_is_refused_and_given_back(chat_page: Page):
    page = chat_page
    pasted = "a" * 1_000_000

    send(page, pasted)

    expect(page.get_by_role("alert")).to_contain_text("The message is too long")
    expect(page.get_by_role("textbox", name="Message")).to_have_value(pasted)
    expect(user_messages(page)).to_have_count(0)

    send(page, "A shorter one")

    expect(replies(page)).to_have_text(["You said: \u201cA shorter one\u201d."])


def test_a_message_the_server_will_not_read_is_given_back_and_not_sent_again(chat_page: Page):
    """Past the server's hard limit the socket is closed (1009): the page says so, gives the
    text back and reconnects without sending it again."""
    page = chat_page
    pasted = "b" * (WEBSOCKET_MAX_MESSAGE_BYTES + 1)
    sent_sizes = []
    page.on(
        "websocket",
        lambda ws: ws.on("framesent", lambda payload: sent_sizes.append(len(payload))),
    )

    send(page, pasted)

    expect(page.get_by_role("alert")).to_contain_text("The message is too long to send")
    expect(page.get_by_role("textbox", name="Message")).to_have_value(pasted)
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    send(page, "Still here")
    expect(replies(page)).to_have_text(["You said: \u201cStill here\u201d."])
    assert len([size for size in sent_sizes if size > WEBSOCKET_MAX_MESSAGE_BYTES]) == 1


def test_a_lost_connection_is_retried_and_the_message_is_not_run_twice(chat_page: Page):
    page = chat_page
    sent_frames = []
    connections = []

    def relay(ws: WebSocketRoute) -> None:
        """Pass frames through; on the first connection, drop the line at the first delta.
        A short turn may have sent its every frame by then: none of them gets through."""
        server = ws.connect_to_server()
        connections.append(ws)
        first = len(connections) == 1
        dropped = False

        def to_server(message):
            sent_frames.append(json.loads(message))
            server.send(message)

        def to_page(message):
            nonlocal dropped
            if first and not dropped and json.loads(message)["type"] == "delta":
                dropped = True
                server.close()
                ws.close()
            if not dropped:
                ws.send(message)

        ws.on_message(to_server)
        server.on_message(to_page)

    page.route_web_socket(re.compile(r"/ws/chat/"), relay)

    send(page, "Are you still there?")

    # The chat is named after its first message once that turn is complete.
    expect(page.get_by_role("heading", level=1)).to_have_text("Are you still there?")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    expect(user_messages(page)).to_have_text(["Are you still there?"])
    messages = [frame for frame in sent_frames if frame["type"] == "user_message"]
    assert len(connections) == 2
    assert len(messages) == 2
    assert messages[0]["client_message_id"] == messages[1]["client_message_id"]

    page.reload()

    expect(user_messages(page)).to_have_text(["Are you still there?"])
    expect(replies(page)).to_have_count(1)


def test_on_a_narrow_screen_the_list_and_the_panel_open_as_drawers(new_page):
    page = new_page({"width": 420, "height": 860})
    sidebar = page.get_by_role("complementary", name="Chats")
    panel = state_panel(page)
    expect(sidebar).to_be_hidden()
    expect(panel).to_be_hidden()
    send(page, "my name is Ada")
    expect(replies(page).last).to_have_text(NICE_TO_MEET_ADA)

    chats = page.get_by_role("button", name="Chats")
    chats.click()

    expect(sidebar).to_be_visible()
    expect(chats).to_have_attribute("aria-expanded", "true")
    expect(sidebar.get_by_role("link", name=re.compile("^my name is Ada"))).to_be_visible()
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(chats).to_be_focused()

    page.get_by_role("button", name="State & context").click()

    expect(panel).to_be_visible()
    expect(panel.locator("[data-scope=user] .state-row")).to_have_text(["user:nameAda"])
