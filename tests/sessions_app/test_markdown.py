"""Markdown rendering of chat messages: useful formatting in, nothing executable out."""

from html.parser import HTMLParser

import pytest
from google.genai import types

from sessions_app.events import Event
from sessions_app.markdown import ALLOWED_TAGS, LINK_REL, markdown_render_safe
from sessions_app.serializers import event_representation


class _Elements(HTMLParser):
    """Every start tag of a fragment with its attributes, as a browser would parse them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser.elements


def assert_inert(html: str) -> None:
    """No element outside the allow-list, no event handler, style or non-web URL."""
    for tag, attrs in elements(html):
        assert tag in ALLOWED_TAGS, html
        for name, value in attrs.items():
            assert not name.startswith("on"), html
            assert name not in {"style", "src", "srcdoc", "formaction"}, html
            if name == "href":
                scheme = (value or "").strip().split(":", 1)[0].lower()
                assert ":" not in (value or "") or scheme in {"http", "https", "mailto"}, html


HOSTILE_INPUTS = [
    "<script>alert(1)</script>",
    "hello <script>alert(document.cookie)</script> world",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
    "<iframe src=https://evil.example></iframe>",
    "<style>body{display:none}</style>",
    "<b onclick=alert(1)>bold</b>",
    "<svg onload=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](java&#115;cript:alert(1))",
    "[click](&#x6A;avascript:alert(1))",
    "[click](<javascript:alert(1)>)",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click][ref]\n\n[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "![x](javascript:alert(1))",
    '![x" onerror="alert(1)](https://example.com/a.png)',
    '[x](https://example.com/"onmouseover="alert(1))',
    '```js" onmouseover="alert(1)\nalert(1)\n```',
    "<!-- <script>alert(1)</script> -->",
    "<div style='position:fixed'>overlay</div>",
    "<form action=https://evil.example><input name=password></form>",
]


@pytest.mark.parametrize("text", HOSTILE_INPUTS)
def test_hostile_input_renders_inert(text):
    assert_inert(markdown_render_safe(text))


def test_raw_html_is_shown_as_text_not_interpreted():
    html = markdown_render_safe("Use <script>alert(1)</script> carefully")

    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_event_handler_attributes_never_survive():
    html = markdown_render_safe("<img src=x onerror=alert(1)> and <b onclick=alert(2)>b</b>")

    assert "<img" not in html
    assert "<b " not in html
    assert all(not name.startswith("on") for _, attrs in elements(html) for name in attrs)


@pytest.mark.parametrize(
    "text",
    [
        "[click](javascript:alert(1))",
        "[click](JAVASCRIPT:alert(1))",
        "[click](java&#115;cript:alert(1))",
        "[click][ref]\n\n[ref]: javascript:alert(1)",
        "![pic](javascript:alert(1))",
    ],
)
def test_javascript_links_are_not_links(text):
    html = markdown_render_safe(text)

    assert all(tag != "a" for tag, _ in elements(html))


def test_a_web_link_keeps_its_address_and_gets_a_safe_rel():
    html = markdown_render_safe("See [the docs](https://example.com/docs?a=1&b=2).")

    [(_, attrs)] = [element for element in elements(html) if element[0] == "a"]
    assert attrs["href"] == "https://example.com/docs?a=1&b=2"
    assert attrs["rel"] == LINK_REL
    assert "target" not in attrs


def test_links_with_other_schemes_lose_their_address():
    html = markdown_render_safe("[files](ftp://example.com/x)")

    [(tag, attrs)] = elements(html)[1:]
    assert tag == "a"
    assert "href" not in attrs


def test_an_image_becomes_a_link_labelled_with_its_alt_text():
    html = markdown_render_safe("![a *cat*](https://example.com/cat.png)")

    assert "<img" not in html
    [(_, attrs)] = [element for element in elements(html) if element[0] == "a"]
    assert attrs["href"] == "https://example.com/cat.png"
    assert ">a cat</a>" in html


def test_chat_formatting_is_kept():
    text = (
        "# Title\n\n"
        "Some **bold**, *italic* and `code`.  \nNext line.\n\n"
        "- one\n- two\n\n"
        "3. three\n4. four\n\n"
        "> quoted\n\n"
        "---\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "```python\nprint('hi')\n```\n"
    )

    html = markdown_render_safe(text)

    tags = {tag for tag, _ in elements(html)}
    expected = {"h1", "p", "strong", "em", "code", "br", "ul", "ol", "li", "blockquote", "hr"}
    assert expected | {"table", "thead", "tbody", "tr", "th", "td", "pre"} <= tags
    assert '<ol start="3">' in html
    assert "<code class=\"language-python\">print('hi')\n</code>" in html


def test_a_code_block_language_cannot_smuggle_attributes():
    html = markdown_render_safe('```x" onmouseover="alert(1)\nbody\n```')

    [(_, pre_attrs), (_, code_attrs)] = elements(html)
    assert pre_attrs == {}
    assert set(code_attrs) <= {"class"}
    assert "onmouseover" not in html


def test_plain_text_is_escaped_once():
    assert markdown_render_safe("5 < 6 & 7 > 3") == "<p>5 &lt; 6 &amp; 7 &gt; 3</p>\n"


def test_empty_text_renders_nothing():
    assert markdown_render_safe("") == ""


def test_a_stored_event_with_text_carries_its_safe_html():
    reply = Event(
        author="assistant",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="private reasoning", thought=True),
                types.Part(text="**Hi** <script>alert(1)</script>"),
            ],
        ),
    )
    call = Event(
        author="assistant",
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(name="f", args={}))]
        ),
    )

    shown = event_representation(event=reply, sequence=2, rewound=False)

    assert shown["html"] == "<p><strong>Hi</strong> &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
    assert "html" not in event_representation(event=call, sequence=3, rewound=False)


def test_a_fenced_code_block_carries_its_language_as_its_label():
    html = markdown_render_safe("```python\nprint(1)\n```")

    assert html.startswith('<pre data-language="python"><code class="language-python">')


@pytest.mark.parametrize(
    "info",
    ['js" onmouseover="alert(1)', "a" * 41, "<b>x</b>", ""],
)
def test_a_code_block_label_is_only_ever_a_plain_language_name(info):
    html = markdown_render_safe(f"```{info}\ncode\n```")

    assert "data-language" not in html
    assert "onmouseover" not in html
    assert html.startswith("<pre><code")
