"""Who "he", "she", "his", "her" or a name stand for: the person or animal of the user's life
the conversation last named ("my dad", "my partner, Rui", "a dog named Rex"), so "he's into
woodworking" is read as "my dad's into woodworking" and "Rex turned ten" as "my dog Rex turned
ten", facts about someone in the user's life like any other."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_app.extraction.offline import patterns

_PRONOUN = re.compile(r"^(?P<pronoun>he|she)\b(?P<contracted>'s)?", re.I)
_POSSESSIVE = re.compile(r"^(?P<pronoun>his|her)\s+(?=[a-z])", re.I)
_NAME = re.compile(r"^(?P<name>[A-Z][\w-]+)\s+(?=[a-z])")


@dataclass(frozen=True)
class Referent:
    relation: str  # "dad", "best friend"
    name: str = ""

    @property
    def said(self) -> str:
        return " ".join(["my", self.relation, *([self.name] if self.name else [])])

    def fits(self, pronoun: str) -> bool:
        """Whether "he" or "she" (or "his", "her") can stand for this one."""
        relation = self.relation.split()[-1].lower()
        male = pronoun.lower() in ("he", "his")
        other = patterns.RELATIONS_FEMALE if male else patterns.RELATIONS_MALE
        return relation not in other


class Referents:
    """The people and animals one conversation's user named, in the order they were named."""

    def __init__(self) -> None:
        self.last: Referent | None = None
        self.named: dict[str, Referent] = {}

    def note(self, sentence: str) -> None:
        """Remember whom ``sentence`` names; the last one named is what "he" or "she" next
        stands for."""
        found = [
            (match.start(), Referent(relation=match["relation"], name=match["name"] or ""))
            for pattern in (patterns.RELATION_MENTION, patterns.RELATION_NAMED)
            for match in pattern.finditer(sentence)
        ]
        for _start, referent in sorted(found, key=lambda item: item[0]):
            self.last = referent
            if referent.name:
                self.named[referent.name] = referent

    def resolved(self, sentence: str) -> str:
        """``sentence`` with an opening "he", "she", "his", "her" or a known name said as "my
        <relation> (<name>)", when one named before fits; else unchanged."""
        possessive = _POSSESSIVE.match(sentence)
        if possessive and self.last and self.last.fits(possessive["pronoun"]):
            return f"{self.last.said}'s {sentence[possessive.end() :]}"
        pronoun = _PRONOUN.match(sentence)
        if pronoun and self.last and self.last.fits(pronoun["pronoun"]):
            return f"{self.last.said}{pronoun['contracted'] or ''}{sentence[pronoun.end() :]}"
        name = _NAME.match(sentence)
        if name and name["name"] in self.named:
            return f"{self.named[name['name']].said} {sentence[name.end() :]}"
        return sentence
