"""Which language a text is in, for the safety check: text the check cannot read is suspect.

py3langid (a pure-Python naive Bayes identifier over 97 languages, its model shipped in the
package) names the language; the instruction patterns exist for ``CHECKED_LANGUAGES``. A text
confidently in another language, or written mostly in a script none of them uses, may hold an
instruction the patterns cannot see, so the check holds it for review instead of guessing.
Short texts (a few words) are identified poorly and rarely confidently: they pass on the
patterns alone unless their script gives them away.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from memory_app.safety.patterns import CHECKED_LANGUAGES

CONFIDENT = 0.8
MIN_LETTERS = 8


@lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _latin(char: str) -> bool:
    return unicodedata.name(char, "").startswith("LATIN")


def _mostly_unchecked_script(text: str) -> bool:
    letters = [char for char in text if char.isalpha()]
    if len(letters) < MIN_LETTERS:
        return False
    return sum(map(_latin, letters)) * 2 < len(letters)


def _other_scripts(text: str) -> str:
    """``text`` with its Latin letters blanked: what it says in other scripts, whatever
    English date, name or label comes with it."""
    return "".join(" " if char.isalpha() and _latin(char) else char for char in text)


def unchecked_language(text: str) -> str | None:
    """The code of the language ``text`` is in when the check cannot read it, else None: the
    whole text is identified, and its part in other scripts than Latin on its own."""
    for part in (text, _other_scripts(text)):
        if sum(char.isalpha() for char in part) < MIN_LETTERS:
            continue
        language, probability = _identifier().classify(part)
        if language in CHECKED_LANGUAGES:
            continue
        if probability >= CONFIDENT or _mostly_unchecked_script(part):
            return language
    return None
