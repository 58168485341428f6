"""Template tags of the staff console's pages about long-term memory."""

from __future__ import annotations

from django import template

from memory_app.models import EmbeddingWarning
from memory_app.selectors.console import embedding_warnings_open

register = template.Library()


@register.simple_tag(takes_context=True)
def embedding_warnings(context: template.Context) -> list[EmbeddingWarning]:
    """The open embedding warnings, for a staff member who may see them."""
    if not context["request"].user.has_perm("memory_app.view_embeddingwarning"):
        return []
    return embedding_warnings_open()
