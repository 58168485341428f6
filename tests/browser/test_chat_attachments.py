"""Attachments in a real browser: attach an image and a PDF, see them stored, shown and given
to the model (the offline model names each by name, type and size); a mislabelled file is
refused with the reason and nothing is stored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.server import Server
from tests.sample_files import image_bytes, pdf_bytes, pdf_text_bytes

pytestmark = pytest.mark.browser

PNG = image_bytes("PNG", (120, 80))
PDF = pdf_bytes(2)


def stored_files(server: Server) -> list[Path]:
    return [path for path in Path(server.env["ARTIFACTS_DIR"]).rglob("*") if path.is_file()]


def test_an_image_and_a_pdf_are_stored_shown_and_sent_to_the_model(chat_page: Page, server):
    page = chat_page
    before = len(stored_files(server))

    page.locator("#attach-input").set_input_files(
        [
            {"name": "logo.png", "mimeType": "image/png", "buffer": PNG},
            {"name": "spec.pdf", "mimeType": "application/pdf", "buffer": PDF},
        ]
    )
    tray = page.get_by_role("list", name="Files to send")
    expect(tray.get_by_role("listitem")).to_have_count(2)
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("What are these?")
    composer.press("Enter")

    reply = page.locator("#messages .entry-agent .bubble-body").last
    expect(reply).to_contain_text(
        f"I received logo.png (a PNG image, {len(PNG)} bytes) and "
        f"spec.pdf (a PDF document, {len(PDF)} bytes)."
    )
    expect(tray).to_be_hidden()
    sent = page.locator("#messages .entry-user").last
    preview = sent.get_by_role("img", name="logo.png")
    expect(preview).to_be_visible()
    assert preview.evaluate("image => image.complete && image.naturalWidth") == 120
    expect(sent.get_by_role("link", name="spec.pdf")).to_have_attribute(
        "href", re.compile(r"^/api/artifacts/[0-9a-f-]{36}/content/$")
    )
    assert len(stored_files(server)) == before + 2

    page.reload()
    sent = page.locator("#messages .entry-user").last
    expect(sent.get_by_role("img", name="logo.png")).to_be_visible()
    href = sent.get_by_role("link", name="spec.pdf").get_attribute("href")
    download = page.request.get(server.base_url + href)
    assert download.body() == PDF


def test_a_png_named_pdf_is_refused_with_the_reason_and_nothing_is_stored(chat_page: Page, server):
    page = chat_page
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("Hello")
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent").last).to_be_visible()
    before = len(stored_files(server))

    page.locator("#attach-input").set_input_files(
        [{"name": "report.pdf", "mimeType": "application/pdf", "buffer": PNG}]
    )
    composer.fill("Read this")
    composer.press("Enter")

    expect(page.get_by_role("alert")).to_contain_text(
        "report.pdf is named as a PDF document but its content is a PNG image"
    )
    expect(page.get_by_role("list", name="Files to send").get_by_role("listitem")).to_have_count(1)
    assert len(stored_files(server)) == before
    expect(page.locator("#messages .entry-user")).to_have_count(1)


@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 800}, {"width": 390, "height": 844}, {"width": 320, "height": 640}],
    ids=["1280px", "390px", "320px"],
)
def test_the_offline_model_quotes_what_a_text_file_and_a_pdf_say(new_page, viewport):
    page = new_page(viewport)
    page.locator("#attach-input").set_input_files(
        [
            {
                "name": "notes.txt",
                "mimeType": "text/plain",
                "buffer": b"Bring boots for the vineyard walk.\n",
            },
            {
                "name": "harvest.pdf",
                "mimeType": "application/pdf",
                "buffer": pdf_text_bytes("The harvest starts on 12 September"),
            },
        ]
    )
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("What does the text file say?")
    composer.press("Enter")

    reply = page.locator("#messages .entry-agent .bubble-body").last
    expect(reply).to_contain_text("notes.txt says: \u201cBring boots for the vineyard walk.\u201d")
    expect(reply).to_contain_text("harvest.pdf says: \u201cThe harvest starts on 12 September")
    expect(reply).not_to_contain_text("You said")
