"""The forms of a text the safety check reads, so that a disguise does not get an instruction
or a secret past it.

``text_normalise``: Unicode NFKC (full-width and mathematical letters become plain ones) with
invisible characters removed: format characters (zero-width spaces and joiners, bidi controls,
the tag characters that smuggle ASCII past a reader) and the fillers that render as nothing.
``text_folded``: that text again as a model reads it: HTML entities decoded (``&lt;`` is a
``<``), look-alike letters of other scripts mapped to the letters they imitate (the Unicode
confusables skeleton, UTS #39), digits and signs written for letters read as letters
("p@ssw0rd"), words spelled out letter by letter joined, with the wider or other gaps between
them kept as spaces ("i g n o r e   p r e v i o u s", "i-g-n-o-r-e p-r-e-v-i-o-u-s"), and words
hyphenated or split by dots and dashes joined ("instruc- tions", "in.struc.tions").
``spelled_out_runs``: each run of letters spelled out, joined without any gap, for the run
whose gaps are all alike ("i g n o r e p r e v i o u s") and so tell no words apart.
``encoded_texts``: what base64 runs in the text decode to, when that is readable text.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from collections import Counter

from core.text import confusable_skeleton

# Characters that render as nothing but are not format characters (category Cf).
_BLANK_LETTERS = {"\u034f", "\u115f", "\u1160", "\u3164", "\uffa0", "\u180e"}
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_LEET = str.maketrans(
    {"@": "a", "4": "a", "$": "s", "5": "s", "0": "o", "1": "i", "!": "i", "3": "e", "7": "t"}
)
_LETTER_GAP = re.compile(r"[^\S\n]*[._*\-][^\S\n]*|[^\S\n]+")
_SPELLED_OUT = re.compile(rf"(?<!\w)\w(?:(?:{_LETTER_GAP.pattern})\w(?!\w)){{2,}}")
_SPLIT_WORD = re.compile(r"(?<=\w)(?:[._*\-]|-\s+)(?=\w)")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
MIN_DECODED_CHARS = 8
_TAG_CHARACTERS = re.compile("[\U000e0000-\U000e007f]+")


def invisible_strip(text: str) -> str:
    """``text`` without the characters that show as nothing."""
    return "".join(
        char for char in text if unicodedata.category(char) != "Cf" and char not in _BLANK_LETTERS
    )


def _visible(text: str) -> str:
    return unicodedata.normalize("NFKC", invisible_strip(text))


def text_normalise(text: str) -> str:
    """NFKC without invisible characters, runs of spaces as one (line breaks kept: a role
    marker at the start of a line means something)."""
    return _HORIZONTAL_SPACE.sub(" ", _visible(text)).strip()


def _letters_joined(match: re.Match[str]) -> str:
    """A spelled-out run as the words it spells: the gap used most between its letters
    joins them, any other gap (wider, or of another kind) parts two words."""
    gaps = _LETTER_GAP.findall(match.group(0))
    letter_gap = Counter(gaps).most_common(1)[0][0]
    letters = _LETTER_GAP.split(match.group(0))
    words = letters[:1]
    for gap, letter in zip(gaps, letters[1:], strict=True):
        words.append(letter if gap == letter_gap else " " + letter)
    return "".join(words)


def _lookalikes_read(text: str) -> str:
    folded = html.unescape(_visible(text)).casefold().translate(_LEET)
    return confusable_skeleton(folded).casefold()


def text_folded(text: str) -> str:
    """The normalised text in lower case with entities, look-alikes, look-alike digits and
    signs, spelled-out and split words read as the plain words they imitate."""
    folded = _SPELLED_OUT.sub(_letters_joined, _lookalikes_read(text))
    folded = _SPLIT_WORD.sub("", folded)
    return _HORIZONTAL_SPACE.sub(" ", folded).strip()


def spelled_out_runs(text: str) -> list[str]:
    """Each run of ``text`` spelled out letter by letter, its letters joined without a gap."""
    return [
        re.sub(r"\W|_", "", match.group(0))
        for match in _SPELLED_OUT.finditer(_lookalikes_read(text))
    ]


def _readable(raw: bytes) -> str | None:
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(char.isprintable() or char in "\n\t" for char in decoded)
    letters = sum(char.isalpha() for char in decoded)
    if len(decoded) < MIN_DECODED_CHARS or printable < len(decoded) or letters * 2 < len(decoded):
        return None
    return decoded


def encoded_texts(text: str) -> list[str]:
    """Readable texts hidden in ``text``: what its base64 runs decode to (standard or URL-safe
    alphabet), and what runs of Unicode tag characters spell (invisible, yet a model reads
    them as the ASCII they shadow)."""
    found = [
        "".join(chr(ord(char) - 0xE0000) for char in run.group(0))
        for run in _TAG_CHARACTERS.finditer(text)
    ]
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0).rstrip("=")
        padded = run + "=" * (-len(run) % 4)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                readable = _readable(decode(padded))
            except (binascii.Error, ValueError):
                continue
            if readable:
                found.append(readable)
                break
    return found
