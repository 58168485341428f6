"""Sizes as a person reads them: "30 MB", not "31,457,280 bytes".

Units are binary (1 KB = 1024 bytes), as the limits are set (``10 * 1024 * 1024``) and as file
managers show files, so a limit reads as the round number it was set to. Every message that
tells a person a size (a refused attachment, an oversized event or state value, a file a memory
keeps) says it with these.
"""

from __future__ import annotations

_UNITS = (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024))


def size_words(size: int) -> str:
    """``size`` bytes in the largest unit it reaches, with one decimal where it is not whole:
    "1 byte", "512 bytes", "2.1 KB", "30 MB"."""
    for unit, scale in _UNITS:
        if size >= scale:
            amount = f"{size / scale:.1f}".removesuffix(".0")
            return f"{amount} {unit}"
    return "1 byte" if size == 1 else f"{size:,} bytes"


def size_and_limit_words(size: int, limit: int) -> tuple[str, str]:
    """``size`` and the ``limit`` it passed, in words that tell them apart: where both round to
    the same words (a file one byte over 10 MB), each is followed by its exact count of
    bytes."""
    said, allowed = size_words(size), size_words(limit)
    if said == allowed:
        return f"{said} ({size:,} bytes)", f"{allowed} ({limit:,} bytes)"
    return said, allowed
