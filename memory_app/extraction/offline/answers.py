"""An answer with no subject, read through the assistant's question it answers: "What do you
drink instead?" then "Mostly rooibos in the afternoon." is "The user mostly drinks rooibos in
the afternoon."; "What are you reading?" then "Dune." is "The user is reading Dune."."""

from __future__ import annotations

import re

from memory_app.extraction.offline.phrasing import pronouns_third_person, third_person_verb
from memory_app.extraction.offline.sentences import sentence_is_small_talk, sentences_split

# "(Really?) What do you drink (instead)?", "How do you get around now?", "What are you
# reading?", "Where will you go?": a question about the user's own life, asked of them.
_ASKED = re.compile(
    r"^(?P<wh>what|where|how)\s+(?P<aux>do|are|will)\s+you\s+(?P<verb>[a-z]+)"
    r"(?P<particle>(?:\s+(?:around|up|out|about|on|with))*)"
    r"(?:\s+(?:instead|now|these\s+days|usually|lately|most\s+days|first))*\s*\?$",
    re.I,
)
# Questions whose answer is a request or an opinion, not a fact about the user: "What do you
# want?", "What do you think?", "How are you doing?".
_NOT_ASKED_VERBS = frozenset(
    [
        "want",
        "need",
        "mean",
        "think",
        "know",
        "have",
        "do",
        "say",
        "suggest",
        "recommend",
        "doing",
        "thinking",
        "looking",
        "asking",
        "saying",
        "feeling",
        "getting",
        "finding",
    ]
)
_ADVERB = re.compile(r"^(?P<adverb>mostly|usually|always|often|sometimes|mainly)\b[,]?\s+", re.I)
# Answers that are no fact: a yes or no, thanks, an opinion of the reply, a first-person
# statement (read by the rules themselves), a request ("Write a haiku ...").
_NOT_ANSWERS = re.compile(
    r"^(?:i|i'm|my|we|we're|yes|yeah|yep|no|nope|not|maybe|good|great|thanks|thank|haha|sure|"
    r"ok|okay|perfect|nice|cool|please|can|could|would|what|why|how|who|when|where|which|"
    r"nothing|none|nah|dunno|idk|whatever|let's|let|"
    r"write|explain|tell|give|show|make|help|translate|summari[sz]e|list|find|create|draft|"
    r"suggest|describe|generate|send|check|fix|remind|compare|recommend|plan|book|add)\b",
    re.I,
)
ANSWER_WORDS = 12
# An answer opening with a function word, lowercased inside the fact ("By bike" -> "by bike");
# a name keeps its capital ("Dune").
_FUNCTION_WORD = re.compile(r"^(?:By|With|On|At|In|A|An|The|To|From|For|Some|Just|Only)\b")


def asked_question(text: str) -> re.Match | None:
    """The question about the user's own life the assistant's turn ends with, or None."""
    sentences = [s.strip() for s in sentences_split(text) if s.strip()]
    if not sentences:
        return None
    last = re.sub(r"^(?:really|and|so|ok|okay|nice|great)[?!,.]?\s+", "", sentences[-1], flags=re.I)
    asked = _ASKED.match(last)
    if asked is None or asked["verb"].lower() in _NOT_ASKED_VERBS:
        return None
    if asked["aux"].lower() == "are" and not asked["verb"].lower().endswith("ing"):
        return None
    return asked


def answer_text(*, asked: re.Match, answer: str) -> str | None:
    """The fact ``answer`` states as the answer to ``asked``, or None when it is no answer
    (a question, small talk, a yes or no, a first-person statement, a long message)."""
    said = " ".join(answer.split()).rstrip(" .!")
    if (
        not said
        or said.endswith("?")
        or len(said.split()) > ANSWER_WORDS
        or len(sentences_split(said)) > 1
        or sentence_is_small_talk(said)
        or _NOT_ANSWERS.match(said)
    ):
        return None
    adverb = _ADVERB.match(said)
    value = said[adverb.end() :] if adverb else said
    verb, aux = asked["verb"].lower(), asked["aux"].lower()
    particle = " ".join(asked["particle"].split())
    if aux == "do":
        words = [third_person_verb(verb)]
    elif aux == "are":
        words = ["is", verb]
    else:
        words = ["will", verb]
    if adverb:
        words.insert(1 if aux != "do" else 0, adverb["adverb"].lower())
    if asked["wh"].lower() == "where" and not particle and not re.match(r"(?:to|in|at)\b", value):
        particle = "to"
    if _FUNCTION_WORD.match(value):
        value = value[:1].lower() + value[1:]
    return pronouns_third_person(" ".join(w for w in ["The user", *words, particle, value] if w))
