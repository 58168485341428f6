"""Small previews of attached images, made on request from the stored file."""

from __future__ import annotations

import io

from PIL import Image

THUMBNAIL_PIXELS = 320


def thumbnail_png(data: bytes) -> bytes:
    """A PNG at most ``THUMBNAIL_PIXELS`` on its longer side (an animation's first frame).

    The stored file was decoded whole when it was accepted, so this does not fail on it.
    """
    with Image.open(io.BytesIO(data)) as image:
        image.seek(0)
        preview = image.convert("RGBA")
    preview.thumbnail((THUMBNAIL_PIXELS, THUMBNAIL_PIXELS))
    buffer = io.BytesIO()
    preview.save(buffer, "PNG", optimize=True)
    return buffer.getvalue()
