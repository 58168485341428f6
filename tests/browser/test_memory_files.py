"""Multimodal memory in a real browser, on the offline model: attach a logo and say "remember
this logo"; the memory that keeps the image shows on the Memory page with its preview and a
download; the export holds the file; deleting all one's data removes it from the disk."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.server import Server
from tests.sample_files import image_bytes

pytestmark = pytest.mark.browser

LOGO = image_bytes("PNG", (96, 64))


def files_of(server: Server, user_id: int) -> list[Path]:
    folder = Path(server.env["ARTIFACTS_DIR"]) / str(user_id)
    return [path for path in folder.rglob("*") if path.is_file()]


def test_remember_this_logo_keeps_the_image_as_a_memory_until_all_data_is_deleted(
    chat_page: Page, server: Server
):
    page = chat_page
    page.locator("#attach-input").set_input_files(
        [{"name": "logo.png", "mimeType": "image/png", "buffer": LOGO}]
    )
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("remember this logo")
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent .bubble-body").last).to_contain_text(
        "I'll keep logo.png in your memories."
    )
    expect(page.locator("#chat-notices")).to_contain_text("Remembered: ")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory").click()
    memory = page.locator(".memory-item", has_text="asked to remember this logo")
    expect(memory).to_have_count(1)
    expect(memory).to_contain_text(f"logo.png, a PNG image of {len(LOGO)} bytes")
    preview = memory.get_by_role("img", name="The image this memory keeps: logo.png")
    expect(preview).to_be_visible()
    assert preview.evaluate("image => image.complete && image.naturalWidth") == 96
    href = memory.get_by_role("link", name="Download logo.png").get_attribute("href")
    assert page.request.get(server.base_url + href).body() == LOGO
    memory.get_by_text("Why is this remembered?").click()
    expect(memory.locator(".memory-sources")).to_contain_text("remember this logo")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export my data").click()
    data = json.loads(download_info.value.path().read_text(encoding="utf-8"))
    files = {each["id"]: each for each in data["artifacts"]}
    [kept] = [each for each in data["memories"] if each["image_artifact_id"]]
    image = files[kept["image_artifact_id"]]
    assert image["filename"] == "user:logo.png" and image["session_id"] is None
    assert base64.b64decode(image["data_base64"]) == LOGO
    user_id = data["user"]["id"]
    assert len(files_of(server, user_id)) == 2  # the chat's attachment and the memory's copy

    page.get_by_role("link", name="Delete all my data…").click()
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Delete all my data").click()
    expect(page.get_by_text("All your chats, memories and state were deleted.")).to_be_visible()

    assert files_of(server, user_id) == []
    assert page.request.get(server.base_url + href).status == 404
