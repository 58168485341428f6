"""Markdown of chat messages rendered to HTML that is safe to insert into a page.

Message text comes from users and from models that repeat what users say, so
it is treated as hostile: markdown-it (CommonMark plus tables) renders it with
raw HTML disabled, and nh3 then keeps only the tags and attributes a chat
message needs. Links may only point to http(s) and mailto addresses, open no
window handle on this page and pass no referrer; images become links (an
image would load a third-party URL in the reader's browser by itself).
"""

from __future__ import annotations

import importlib.util
import re

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "blockquote",
    "a",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "hr",
}
ALLOWED_URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "noopener noreferrer nofollow"
_CODE_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")
_CODE_LANGUAGE_CLASS = re.compile(r"language-" + _CODE_LANGUAGE.pattern)

# Linkify (bare URLs become links) needs the optional linkify-it-py package.
_LINKIFY = importlib.util.find_spec("linkify_it") is not None
_renderer = MarkdownIt("commonmark", {"html": False, "linkify": _LINKIFY}).enable("table")
if _LINKIFY:
    _renderer.enable("linkify")


def _image_as_link(renderer, tokens, idx, options, env) -> str:
    """An image becomes a link to it, labelled with its alt text: nothing loads by itself."""
    token = tokens[idx]
    label = renderer.renderInlineAsText(token.children or [], options, env) or token.attrGet("src")
    return f'<a href="{escapeHtml(str(token.attrGet("src") or ""))}">{escapeHtml(str(label))}</a>'


_renderer.add_render_rule("image", _image_as_link)
_fence_default = _renderer.renderer.rules["fence"]


def _fence_labelled(renderer, tokens, idx, options, env) -> str:
    """A fenced code block that names its language carries it on ``<pre data-language>``,
    which the page shows as the block's label."""
    html = _fence_default(tokens, idx, options, env)
    language = (tokens[idx].info or "").strip().split(maxsplit=1)
    if language and _CODE_LANGUAGE.fullmatch(language[0]):
        html = html.replace("<pre>", f'<pre data-language="{escapeHtml(language[0])}">', 1)
    return html


_renderer.add_render_rule("fence", _fence_labelled)


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """Keep a code block's ``language-*`` class (for highlighting) and its label; drop any
    other class or label."""
    if attribute == "class":
        return value if tag == "code" and _CODE_LANGUAGE_CLASS.fullmatch(value) else None
    if attribute == "data-language":
        return value if tag == "pre" and _CODE_LANGUAGE.fullmatch(value) else None
    return value


_cleaner = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    clean_content_tags={"script", "style"},
    attributes={"a": {"href"}, "code": {"class"}, "pre": {"data-language"}, "ol": {"start"}},
    attribute_filter=_attribute_filter,
    url_schemes=ALLOWED_URL_SCHEMES,
    link_rel=LINK_REL,
    strip_comments=True,
)


def markdown_render_safe(text: str) -> str:
    """``text`` rendered from Markdown to HTML that can go into a page as it is.

    Raw HTML in the text is shown as text, never interpreted; whatever the
    renderer produces passes the allow-list, so no script, event handler,
    style or ``javascript:`` URL can come out whatever the input.
    """
    return _cleaner.clean(_renderer.render(text))
