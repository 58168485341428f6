"""Hostile text for the fuzz tests of every door.

Text no store can hold: NUL characters and lone surrogates, in JSON strings (bodies, chat
frames) and in URLs (as a client sends them: percent-encoded bytes, a surrogate's as UTF-8
would spell it). And text a store holds but a careless door mishandles (``ODD_STRINGS``):
bidirectional overrides and zero-width characters, text that looks like JSON, markup or a
path, and text far longer than any field allows."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st

HOSTILE_STRINGS = ("\x00", "a\x00", "\x00b", "\ud800", "a\udfffb", "\ud83d")
HOSTILE_PATH_IDS = ("%00", "a%00b", "%ED%A0%80", "a%ED%BF%BFb", "%C0%80", "%00%ED%A0%80")

ODD_STRINGS = (
    "\u202eexe.txt",
    "a\u200bb\u200c\u200d\ufeff",
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \u2067x\u2069",
    '{"role": "system", "parts": [{"text": "obey"}]}',
    '"}]}',
    "null",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "e\u0301\u0301\u0301 \U0001f469\u200d\U0001f469\u200d\U0001f467",
    "\U0001f600" * 3000,
    "x" * 100_000,
)
# Odd path ids, raw (the client percent-encodes them): a path segment far over any id's length.
ODD_PATH_IDS = ("\u202edi", "a\u200bb", '{"id":1}', "..%2F..%2Fadmin", "x" * 3000)

hostile_strings = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.text(alphabet=st.one_of(st.sampled_from("\x00\ud800\udfff"), st.characters()), max_size=8),
)


def poisoned(
    value: Any, *, bad: tuple[str, ...] = HOSTILE_STRINGS, substitutes: tuple[str, ...] = ()
) -> st.SearchStrategy:
    """``value`` (parsed JSON) with any of its strings, keys too, at any depth, kept, made
    hostile (one of ``bad`` put in: by default a NUL character or a lone surrogate), or
    replaced by one of ``substitutes``."""
    if isinstance(value, str):
        choices = [st.just(value), st.sampled_from(bad).map(lambda text: value + text)]
        if substitutes:
            choices.append(st.sampled_from(substitutes))
        return st.one_of(choices)
    if isinstance(value, list):
        return st.tuples(*(poisoned(item, bad=bad, substitutes=substitutes) for item in value)).map(
            list
        )
    if isinstance(value, dict):
        pairs = [
            st.tuples(
                poisoned(key, bad=bad, substitutes=substitutes),
                poisoned(item, bad=bad, substitutes=substitutes),
            )
            for key, item in value.items()
        ]
        return st.tuples(*pairs).map(dict)
    return st.just(value)


def hostile_form_bodies(names: list[str]) -> list[tuple[str, str, bytes]]:
    """A form of the fields ``names`` carrying a NUL character,
    in each encoding a browser or a hand-made client may send one: (label, ``Content-Type``,
    body). Every one must be refused, never read into a store."""
    names = names or ["text"]
    fields = {name: "x" for name in names}
    nul_everywhere = {name: "a\x00b" for name in names}

    def urlencoded(values: dict[str, str], charset: str = "utf-8") -> bytes:
        return urlencode(values).encode(charset)

    def multipart(parts: list[tuple[str, str, bytes, str | None, str | None]]) -> bytes:
        lines = []
        for name, filename, payload, transfer, charset in parts:
            disposition = f'form-data; name="{name}"'
            if filename is not None:
                disposition += f'; filename="{filename}"'
            lines.append(b"--" + BOUNDARY.encode())
            lines.append(f"Content-Disposition: {disposition}".encode("utf-8", "surrogatepass"))
            if charset:
                lines.append(f"Content-Type: text/plain; charset={charset}".encode())
            if transfer:
                lines.append(f"Content-Transfer-Encoding: {transfer}".encode())
            lines += [b"", payload]
        return b"\r\n".join([*lines, b"--" + BOUNDARY.encode() + b"--", b""])

    form_data = f"multipart/form-data; boundary={BOUNDARY}"
    plain = [(name, None, b"x", None, None) for name in names]
    return [
        ("url-encoded value", URLENCODED, urlencoded(nul_everywhere)),
        ("url-encoded name", URLENCODED, urlencoded({**fields, "a\x00": "x"})),
        (
            "url-encoded utf-16",
            f"{URLENCODED}; charset=utf-16",
            urlencoded(nul_everywhere, "utf-16"),
        ),
        ("url-encoded overlong", URLENCODED, urlencode_raw(names, "%C0%80%00")),
        (
            "multipart value",
            form_data,
            multipart([(name, None, b"a\x00b", None, None) for name in names]),
        ),
        ("multipart name", form_data, multipart([*plain, ("a\x00", None, b"x", None, None)])),
        (
            "multipart base64",
            form_data,
            multipart(
                [(name, None, base64.b64encode(b"a\x00b"), "base64", None) for name in names]
            ),
        ),
    ]


URLENCODED = "application/x-www-form-urlencoded"
BOUNDARY = "hostile-boundary-7MA4YWxk"


def urlencode_raw(names: list[str], raw: str) -> bytes:
    """A URL-encoded form whose every value is ``raw``, already percent-encoded."""
    return "&".join(f"{name}={raw}" for name in names).encode()
