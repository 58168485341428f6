"""A message cut into sentences as the offline rules read them, each cleaned of an opening
filler word and its closing punctuation."""

from __future__ import annotations

import re

from memory_app.extraction.offline.patterns import SMALL_TALK_MARKERS, SMALL_TALK_WORDS

_SENTENCE_SPLIT = re.compile(
    r"(?<=[.!?;])\s+|\n+|,?\s+(?:and|but|so)\s+(?:(?:now|then|also|still)\s+)?(?=(?:I|my)\b)",
    re.I,
)
# ", I", ", my" ..., also after a word that only links or dates what follows: ", so I", ",
# these days I", ", now I".
_CLAUSE_SPLIT = re.compile(
    r",\s+(?=(?:(?:so|and|but|now|these\s+days|nowadays|since\s+then)\s+)?(?:I|[Mm]y|he|she|his|"
    r"her)\b)"
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_FILLER = re.compile(
    r"^(?:(?:oh|well|so|also|and|but|btw|by\s+the\s+way|ok|okay|hey|hi|hello|fyi)\b[,!:]?\s*)+",
    re.I,
)


# "Mia and I ...", "Good news, Tom and I ...": a name alone before "and I" is said with it.
_NAME_AND = re.compile(r"(?:^|[,:;!]\s+)(?!I\b)[A-Z][\w'-]+$")


def _sentences(text: str) -> list[str]:
    """``text`` cut at ``_SENTENCE_SPLIT``, except "<Name> and I", which stays whole."""
    pieces, start = [], 0
    for match in _SENTENCE_SPLIT.finditer(text):
        if match.group().strip(", ").lower().startswith("and") and _NAME_AND.search(
            text[start : match.start()]
        ):
            continue
        pieces.append(text[start : match.start()])
        start = match.end()
    pieces.append(text[start:])
    return pieces


def sentences_split(text: str) -> list[str]:
    """The sentences of a message, a sentence also ending before ", I", ", my", ", he", ", she",
    ", his" or ", her" when what precedes is more than an opening word ("Actually, I ..." and
    "No, my ..." stay whole)."""
    pieces = []
    for sentence in _sentences(text):
        start = 0
        for match in _CLAUSE_SPLIT.finditer(sentence):
            head = _FILLER.sub("", sentence[start : match.start()].strip())
            if len(head.split()) >= 2:
                pieces.append(sentence[start : match.start()])
                start = match.end()
        pieces.append(sentence[start:])
    return pieces


# Openings that say nothing of the fact that follows ("Yeah, I'm still a teacher", "These days I
# can't stand coffee"); not "actually", which marks a correction.
_OPENING = re.compile(
    r"^(?:(?:yeah|yes|yep|perfect|great|sure|honestly|lately|these\s+days|nowadays|now|so|"
    r"basically|anyway|mostly|quick\s+one|news|big\s+news|update|since\s+(?:then|"
    r"(?-i:[A-Z])\w+(?:\s+\d{1,4})?|last\s+\w+|the\s+\w+)|as\s+of\s+(?:\w+\s+)?\w+)\b[,!:]?\s+)+"
    r"(?=(?:I|my|we)\b)",
    re.I,
)
_CLOSING = re.compile(r",?\s+(?:by\s+the\s+way|btw|though|anyway|at\s+all(?:\s+though)?)$", re.I)
# "my partner, Rui, is a chef" read as "my partner Rui is a chef".
_NAME_APART = re.compile(r"^([Mm]y\s+[a-z]+),\s+([A-Z][\w'-]+),\s+")
# What "we" say of a household the user speaks for: "we're going (flying ...) to Japan", "we
# don't have any pets", read in the first person singular.
_WE = (
    (
        re.compile(r"^we(?:'re|\s+are)\s+(going|flying|travelling|traveling|heading)\s+to\b", re.I),
        r"I am \1 to",
    ),
    (re.compile(r"^we\s+(?:don't|do\s+not)\s+have\b", re.I), "I do not have"),
    (re.compile(r"^we(?:'re|\s+are)\s+(based|living|settled)\b", re.I), r"I am \1"),
    (
        re.compile(
            r"^we\s+((?:just\s+|finally\s+|recently\s+|also\s+)*)(have|live|moved|relocated|"
            r"bought|settled|decided|chose|picked|booked)\b",
            re.I,
        ),
        r"I \1\2",
    ),
)


def filler_strip(text: str) -> str:
    """``text`` without opening fillers and openings that say nothing of the fact."""
    return _OPENING.sub("", _FILLER.sub("", text.strip())).strip()


def sentence_clean(sentence: str) -> str:
    """The sentence as the rules match it: straight apostrophes, no opening filler word, no
    closing punctuation or closing aside ("by the way", "though"), a name set apart by commas
    taken in ("my partner, Rui, is" -> "my partner Rui is"), and what "we" say of the user's
    home or plans in the first person."""
    sentence = filler_strip(sentence.replace("\u2019", "'"))
    sentence = sentence.rstrip(".!?;").strip()
    sentence = _CLOSING.sub("", sentence)
    sentence = _NAME_APART.sub(r"\1 \2 ", sentence)
    for pattern, replacement in _WE:
        sentence = pattern.sub(replacement, sentence)
    return sentence


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
