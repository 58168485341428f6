"""Real files of every accepted type, made by the libraries that read them, and damaged ones."""

import io

from PIL import Image
from pypdf import PdfWriter


def image_bytes(image_format: str = "PNG", size: tuple[int, int] = (64, 48)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, image_format)
    return buffer.getvalue()


def pdf_bytes(pages: int = 1) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(200, 200)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()
