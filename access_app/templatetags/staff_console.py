"""Template tags of the staff console's pages."""

from __future__ import annotations

from django import template

from access_app.selectors import ConsoleSection, console_sections_withheld

register = template.Library()


@register.simple_tag(takes_context=True)
def console_withheld(context: template.Context) -> list[ConsoleSection]:
    """The console's sections the signed-in staff member's role does not show."""
    return console_sections_withheld(user=context["request"].user)
