"""The ``sizes`` template library: ``{{ file.size|size_words }}`` reads "2.1 KB" (core.sizes)."""

from django import template

from core.sizes import size_words as _size_words

register = template.Library()


@register.filter
def size_words(size: int | None) -> str:
    """A size in bytes as a person reads it; empty for an unknown size."""
    return "" if size is None else _size_words(int(size))
