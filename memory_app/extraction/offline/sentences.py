"""A message cut into sentences as the offline rules read them, each cleaned of an opening
filler word and its closing punctuation."""

from __future__ import annotations

import re

from memory_app.extraction.offline.patterns import SMALL_TALK_MARKERS, SMALL_TALK_WORDS

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+|,?\s+(?:and|but)\s+(?=(?:I|my)\b)", re.I)
_CLAUSE_SPLIT = re.compile(r",\s+(?=(?:I|[Mm]y)\b)")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_FILLER = re.compile(
    r"^(?:(?:oh|well|so|also|and|btw|by\s+the\s+way|ok|okay|hey|hi|hello|fyi)\b[,!:]?\s*)+", re.I
)


def sentences_split(text: str) -> list[str]:
    """The sentences of a message, a sentence also ending before ", I" or ", my" when what
    precedes is more than an opening word ("Actually, I ..." and "No, my ..." stay whole)."""
    pieces = []
    for sentence in _SENTENCE_SPLIT.split(text):
        start = 0
        for match in _CLAUSE_SPLIT.finditer(sentence):
            head = _FILLER.sub("", sentence[start : match.start()].strip())
            if len(head.split()) >= 2:
                pieces.append(sentence[start : match.start()])
                start = match.end()
        pieces.append(sentence[start:])
    return pieces


def sentence_clean(sentence: str) -> str:
    """The sentence as the rules match it: straight apostrophes, no opening filler word, no
    closing punctuation."""
    sentence = sentence.replace("\u2019", "'").strip()
    sentence = _FILLER.sub("", sentence)
    return sentence.strip().rstrip(".!?;").strip()


def sentence_is_small_talk(sentence: str) -> bool:
    """Whether the sentence only greets, thanks, asks after the other or takes leave ("Hi
    there!", "Hello, how are you?", "Good morning", "Thanks, have a great day!"): every word
    is one of ``SMALL_TALK_WORDS``, or a capitalised name when a greeting, thanks or farewell
    word (``SMALL_TALK_MARKERS``) is there too ("Hey Caroline, good to see you!")."""
    words = _WORD.findall(sentence.replace("\u2019", "'"))
    if not words:
        return False
    lowered = [word.lower() for word in words]
    others = [
        word for word, lower in zip(words, lowered, strict=True) if lower not in SMALL_TALK_WORDS
    ]
    if len(others) == len(words):
        return False
    if not others:
        return True
    return bool(SMALL_TALK_MARKERS.intersection(lowered)) and all(
        word[:1].isupper() and word[1:].islower() for word in others
    )
