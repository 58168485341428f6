"""Small previews of attached images, made on request from the stored file."""

from __future__ import annotations

import io
import warnings

from PIL import Image, UnidentifiedImageError

THUMBNAIL_PIXELS = 320


def thumbnail_png(data: bytes) -> bytes | None:
    """A PNG at most ``THUMBNAIL_PIXELS`` on its longer side (an animation's first frame);
    None for bytes that are no image Pillow reads safely (an agent may save any bytes under
    an image type; an attachment was decoded whole when it was accepted)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                image.seek(0)
                preview = image.convert("RGBA")
    except (
        UnidentifiedImageError,
        OSError,
        ValueError,
        SyntaxError,
        EOFError,
        Image.DecompressionBombError,
        Image.DecompressionBombWarning,
    ):
        return None
    preview.thumbnail((THUMBNAIL_PIXELS, THUMBNAIL_PIXELS))
    buffer = io.BytesIO()
    preview.save(buffer, "PNG", optimize=True)
    return buffer.getvalue()
