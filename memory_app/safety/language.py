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


def _mostly_unchecked_script(text: str) -> bool:
    letters = [char for char in text if char.isalpha()]
    if len(letters) < MIN_LETTERS:
        return False
    latin = sum(unicodedata.name(char, "").startswith("LATIN") for char in letters)
    return latin * 2 < len(letters)


def unchecked_language(text: str) -> str | None:
    """The code of the language ``text`` is in when the check cannot read it, else None."""
    if sum(char.isalpha() for char in text) < MIN_LETTERS:
        return None
    language, probability = _identifier().classify(text)
    if language in CHECKED_LANGUAGES:
        return None
    if probability >= CONFIDENT or _mostly_unchecked_script(text):
        return language
    return None
