"""Memories told to the person they are about, in the pages' templates: the pages speak to
"you", while what is stored (and what the model reads) stays in the third person."""

from __future__ import annotations

from django import template

from memory_app.wording import memory_said_to_user, sentence

register = template.Library()


@register.filter
def to_you(text: str) -> str:
    """ "The user lives in Porto." -> "You live in Porto." """
    return sentence(memory_said_to_user(text))


@register.filter
def to_you_quoted(text: str) -> str:
    """The same as a clause to quote inside a sentence, with no full stop of its own (the
    sentence around it has one): "it was “you live in Gdansk”."."""
    return memory_said_to_user(text)
