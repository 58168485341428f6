"""Hostile text for the fuzz tests of every door.

Text no store can hold: NUL characters and lone surrogates, in JSON strings (bodies, chat
frames) and in URLs (as a client sends them: percent-encoded bytes, a surrogate's as UTF-8
would spell it). And text a store holds but a careless door mishandles (``ODD_STRINGS``):
bidirectional overrides and zero-width characters, text that looks like JSON, markup or a
path, and text far longer than any field allows."""

from __future__ import annotations

from typing import Any

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
