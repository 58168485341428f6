"""What an attachment may be: its type told by its content, never by its name, within limits.

Images (PNG, JPEG, WebP, GIF) are decoded whole by Pillow and PDFs parsed by pypdf, so a
truncated or disguised file is refused rather than stored; text must be UTF-8 without NUL and
must not be markup a browser would run (HTML, SVG, XML). A name's extension, when it has one,
must agree with the content: a PNG named ``.pdf`` is refused, as it would mislead whoever
opens it.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass
from pathlib import PurePath

from django.conf import settings
from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PdfReadError

from core.sizes import size_and_limit_words
from sessions_app.artifact_files import USER_PREFIX, artifact_filename_problem
from sessions_app.errors import InvalidArtifactError

IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
# The types a browser is let show inline: images that run nothing (never SVG).
INLINE_IMAGE_TYPES = frozenset(IMAGE_TYPES.values())
EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
}
TYPE_NAMES = {
    "image/png": "a PNG image",
    "image/jpeg": "a JPEG image",
    "image/webp": "a WebP image",
    "image/gif": "a GIF image",
    "application/pdf": "a PDF document",
    "text/plain": "plain text",
    "text/markdown": "Markdown text",
}
TEXT_TYPES = frozenset({"text/plain", "text/markdown"})
# What a model is given a file's bytes of: the types an attachment may be. An agent may save
# an artifact of any type; a model told of one of another type gets its name, not its bytes.
MODEL_READABLE_TYPES = frozenset(TYPE_NAMES)
ACCEPTED = "PNG, JPEG, WebP or GIF images, PDF documents, plain text or Markdown"
# What WHATWG's MIME sniffing reads as HTML (or XML) at the start of a file: a browser shown
# such a "text" file could run it.
_MARKUP_START = re.compile(
    rb"\s*(<!doctype\s+html|<html|<head|<script|<iframe|<h1|<div|<font|<table|<a[\s>]|<style"
    rb"|<title|<b[\s>]|<body|<br|<p[\s>]|<!--|<\?xml|<svg)",
    re.IGNORECASE,
)
_IMAGE_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


@dataclass(frozen=True)
class CheckedUpload:
    """An upload that may be stored: its name, its bytes and the type its content showed."""

    filename: str
    data: bytes
    mime_type: str

    @property
    def is_image(self) -> bool:
        return self.mime_type.startswith("image/")


def _image_type(data: bytes) -> str | None:
    """The MIME type of a whole, decodable image of an accepted format, else None (also for
    a truncated one: it is decoded to its last pixel)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                image_format = image.format
                for frame in range(getattr(image, "n_frames", 1)):
                    image.seek(frame)
                    image.load()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
        return None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InvalidArtifactError("The image has too many pixels to be read safely.") from None
    return IMAGE_TYPES.get(image_format or "")


def _pdf_whole(data: bytes) -> bool:
    """Whether the PDF ends where a PDF ends and parses, with at least one page."""
    try:
        reader = PdfReader(io.BytesIO(data), strict=True)
        return data.rstrip().endswith(b"%%EOF") and len(reader.pages) > 0
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError, OSError):
        return False


def pdf_text(data: bytes) -> str:
    """The text of a PDF's pages, in order ("" for a PDF with no text layer or one that does
    not parse)."""
    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n".join(page.extract_text() or "" for page in reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError, OSError):
        return ""


def _content_type(filename: str, data: bytes) -> str:
    if data.startswith(b"%PDF-"):
        if not _pdf_whole(data):
            raise InvalidArtifactError(f"{filename} is not a whole PDF (damaged or truncated).")
        return "application/pdf"
    if data.startswith(_IMAGE_SIGNATURES) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        mime_type = _image_type(data)
        if mime_type is None:
            raise InvalidArtifactError(f"{filename} is not a whole image (damaged or truncated).")
        return mime_type
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArtifactError(
            f"{filename} is not a type that can be attached: {ACCEPTED}."
        ) from None
    if "\x00" in text:
        raise InvalidArtifactError(f"{filename} is binary, not text: {ACCEPTED}.")
    if _MARKUP_START.match(data.removeprefix(b"\xef\xbb\xbf")):
        raise InvalidArtifactError(
            f"{filename} is HTML or other markup, which is not accepted: {ACCEPTED}."
        )
    extension = PurePath(filename).suffix.lower()
    return "text/markdown" if EXTENSIONS.get(extension) == "text/markdown" else "text/plain"


def upload_check(*, filename: str, data: bytes) -> CheckedUpload:
    """``data`` named ``filename`` as it would be stored, or ``InvalidArtifactError`` saying
    in words why not (empty, too large, a type not accepted, damaged, a name that is a path or
    that names another type)."""
    problem = artifact_filename_problem(filename)
    if not problem and ("/" in filename or "\\" in filename):
        problem = "it names a file, not a path (no / or \\)."
    if problem or filename.startswith(USER_PREFIX):
        raise InvalidArtifactError(
            f"{filename[:80]!r} cannot name an attachment: "
            + (problem or "it must not start with user:.")
        )
    if not data:
        raise InvalidArtifactError(f"{filename} is empty.")
    limit = settings.ATTACHMENT_MAX_BYTES
    if len(data) > limit:
        size, allowed = size_and_limit_words(len(data), limit)
        raise InvalidArtifactError(f"{filename} is {size}; the limit is {allowed}.")
    extension = PurePath(filename).suffix.lower()
    if extension and extension not in EXTENSIONS:
        raise InvalidArtifactError(f"{filename}: {extension} files are not accepted: {ACCEPTED}.")
    mime_type = _content_type(filename, data)
    named = EXTENSIONS.get(extension)
    if (
        named is not None
        and named != mime_type
        and not (named.startswith("text/") and mime_type.startswith("text/"))
    ):
        raise InvalidArtifactError(
            f"{filename} is named as {TYPE_NAMES[named]} but its content is "
            f"{TYPE_NAMES[mime_type]}; rename it or attach the right file."
        )
    return CheckedUpload(filename=filename, data=data, mime_type=mime_type)


def uploads_check(files: list[tuple[str, bytes]]) -> list[CheckedUpload]:
    """Every file checked (``upload_check``), and their count; the first problem raises, so a
    caller stores all of them or none."""
    limit = settings.ATTACHMENT_MAX_COUNT
    if not files:
        raise InvalidArtifactError("No file was attached.")
    if len(files) > limit:
        raise InvalidArtifactError(
            f"{len(files)} files were attached; at most {limit} go with one message."
        )
    return [upload_check(filename=name, data=data) for name, data in files]
