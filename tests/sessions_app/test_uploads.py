"""What an attachment may be: type by content, whole files only, within limits."""

import pytest

from sessions_app.errors import InvalidArtifactError
from sessions_app.uploads import upload_check, uploads_check
from tests.sample_files import image_bytes, pdf_bytes


@pytest.mark.parametrize(
    ("filename", "data", "mime_type"),
    [
        ("logo.png", image_bytes("PNG"), "image/png"),
        ("photo.jpg", image_bytes("JPEG"), "image/jpeg"),
        ("photo.jpeg", image_bytes("JPEG"), "image/jpeg"),
        ("pic.webp", image_bytes("WEBP"), "image/webp"),
        ("anim.gif", image_bytes("GIF"), "image/gif"),
        ("report.pdf", pdf_bytes(2), "application/pdf"),
        ("notes.txt", "Plain text, café.\n".encode(), "text/plain"),
        ("README.md", b"# Title\n\nSome *Markdown* with <b>inline</b> tags.\n", "text/markdown"),
        ("pasted", image_bytes("PNG"), "image/png"),
    ],
)
def test_each_accepted_type_is_told_by_its_content(settings, filename, data, mime_type):
    checked = upload_check(filename=filename, data=data)

    assert (checked.filename, checked.mime_type, checked.data) == (filename, mime_type, data)


@pytest.mark.parametrize(
    ("filename", "data", "message"),
    [
        ("logo.pdf", image_bytes("PNG"), "named as a PDF document but its content is a PNG image"),
        ("photo.png", image_bytes("JPEG"), "content is a JPEG image"),
        ("report.txt", pdf_bytes(), "named as plain text but its content is a PDF document"),
        ("page.html", b"<!DOCTYPE html><p>hi</p>", ".html files are not accepted"),
        ("page.txt", b"  <html><script>alert(1)</script>", "HTML or other markup"),
        ("image.md", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "HTML or other markup"),
        ("empty.png", b"", "is empty"),
        ("cut.png", image_bytes("PNG", (300, 300))[:-40], "not a whole image"),
        ("cut.jpg", image_bytes("JPEG", (300, 300))[:200], "not a whole image"),
        ("cut.pdf", pdf_bytes()[:-60], "not a whole PDF"),
        ("binary", bytes(range(256)), "not a type that can be attached"),
        ("nul.txt", b"text\x00more", "binary, not text"),
        ("tool.exe", b"MZ\x90\x00", ".exe files are not accepted"),
        ("../../etc/passwd.txt", b"x", "cannot name an attachment"),
        ("..\\boot.ini.txt", b"x", "cannot name an attachment"),
        ("user:shared.txt", b"x", "must not start with user:"),
    ],
)
def test_hostile_or_broken_files_are_refused_with_the_reason(filename, data, message):
    with pytest.raises(InvalidArtifactError, match=message):
        upload_check(filename=filename, data=data)


def test_an_attachment_over_the_limit_is_told_in_megabytes(settings):
    settings.ATTACHMENT_MAX_BYTES = 10 * 1024 * 1024

    with pytest.raises(InvalidArtifactError) as refused:
        upload_check(filename="big.bin", data=b"x" * 31_457_280)

    assert str(refused.value) == "big.bin is 30 MB; the limit is 10 MB."


def test_size_and_count_limits(settings):
    settings.ATTACHMENT_MAX_BYTES = 1000
    settings.ATTACHMENT_MAX_COUNT = 2

    with pytest.raises(InvalidArtifactError, match="1,001 bytes; the limit is 1,000 bytes"):
        upload_check(filename="big.txt", data=b"x" * 1001)
    assert upload_check(filename="fits.txt", data=b"x" * 1000).mime_type == "text/plain"
    with pytest.raises(InvalidArtifactError, match="3 files were attached; at most 2"):
        uploads_check([("a.txt", b"a"), ("b.txt", b"b"), ("c.txt", b"c")])
    with pytest.raises(InvalidArtifactError, match="No file"):
        uploads_check([])
