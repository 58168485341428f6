"""Query expansion without a model: the words a query means but does not say.

A memory says "The user is allergic to peanuts"; the user asks for "a snack", or about "nut
allergies". Lexical search alone finds neither. Three expansions, each adding terms at a
fraction of a query term's weight, so an exact match still ranks first:

- **sub-words**: a query word that ends an indexed compound word adds that word ("nut" adds
  "peanut", "ball" adds "football"; :meth:`BM25Index.compounds`);
- **related words**: a small hand-written table of everyday concepts (:data:`RELATED_GROUPS`):
  a query word of a group adds the other words of that group ("snack" adds "food", "eat",
  "allergy", ...);
- **pseudo-relevance feedback** (RM3's idea): the best terms of the first pass's best memories,
  by weight in those memories and rarity, are added to the query for a second pass. On the
  LoCoMo dev split it lifted recall@5 from 0.575 to 0.602 lexical-only (docs/memory-retrieval.md).

And the names a query mentions (:func:`query_names`): a capitalised word that does not open
the question, which search rewards memories for holding (a person's name in a memory is rarely
a coincidence; BM25 gives it little weight when half the memories name that person).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable

import numpy as np

from .bm25 import BM25Index
from .text import STOPWORDS, stem, tokenize

SUBWORD_WEIGHT = 0.5
RELATED_WEIGHT = 0.3
FEEDBACK_DOCUMENTS = 3
FEEDBACK_TERMS = 10
FEEDBACK_WEIGHT = 0.3

# Everyday concepts a person asks an assistant about, each a group of words that stand for one
# another in a question ("suggest a snack" should find the allergy; "music" the guitar).
RELATED_GROUPS: tuple[tuple[str, ...], ...] = (
    (
        "food",
        "snack",
        "meal",
        "eat",
        "dish",
        "cuisine",
        "recipe",
        "cook",
        "dinner",
        "lunch",
        "breakfast",
        "restaurant",
        "diet",
        "allergy",
        "allergic",
        "vegan",
        "vegetarian",
        "treat",
    ),
    ("drink", "beverage", "coffee", "tea", "juice", "wine", "beer", "cocktail"),
    (
        "allergy",
        "allergic",
        "intolerance",
        "intolerant",
        "nut",
        "peanut",
        "gluten",
        "lactose",
        "shellfish",
    ),
    (
        "health",
        "illness",
        "sick",
        "doctor",
        "medical",
        "medication",
        "condition",
        "allergy",
        "diabetes",
        "asthma",
        "injury",
        "hospital",
        "therapy",
    ),
    (
        "pet",
        "dog",
        "cat",
        "puppy",
        "kitten",
        "animal",
        "turtle",
        "hamster",
        "bird",
        "fish",
        "horse",
        "rabbit",
    ),
    (
        "family",
        "daughter",
        "son",
        "child",
        "kid",
        "wife",
        "husband",
        "partner",
        "mother",
        "father",
        "mom",
        "dad",
        "sister",
        "brother",
        "parent",
        "grandmother",
        "grandfather",
        "children",
        "fam",
        "baby",
        "grandma",
        "grandpa",
    ),
    (
        "job",
        "work",
        "career",
        "employer",
        "company",
        "office",
        "colleague",
        "boss",
        "profession",
        "occupation",
    ),
    (
        "music",
        "instrument",
        "guitar",
        "piano",
        "violin",
        "drum",
        "clarinet",
        "flute",
        "song",
        "band",
        "concert",
        "sing",
    ),
    (
        "sport",
        "football",
        "soccer",
        "basketball",
        "tennis",
        "baseball",
        "volleyball",
        "golf",
        "swim",
        "run",
        "marathon",
        "hike",
        "cycling",
        "surf",
        "yoga",
        "gym",
        "exercise",
        "fitness",
        "workout",
    ),
    (
        "travel",
        "trip",
        "vacation",
        "holiday",
        "flight",
        "fly",
        "journey",
        "visit",
        "abroad",
        "hotel",
        "seat",
    ),
    ("home", "live", "house", "apartment", "city", "town", "address", "move", "neighborhood"),
    ("book", "read", "novel", "author", "library", "reading"),
    ("art", "paint", "painting", "draw", "drawing", "sketch", "artist", "pottery", "sculpture"),
    ("movie", "film", "cinema", "screenplay", "script", "show", "series", "watch"),
    (
        "school",
        "study",
        "student",
        "university",
        "college",
        "degree",
        "course",
        "class",
        "education",
        "teacher",
    ),
    ("money", "budget", "salary", "pay", "price", "cost", "savings", "expensive", "cheap"),
    ("car", "drive", "vehicle", "bike", "bus", "train", "commute"),
    ("hobby", "pastime", "interest", "enjoy", "fun", "leisure", "activity", "passion"),
    ("relax", "destress", "stress", "unwind", "recharge", "calm", "rest"),
    ("event", "parade", "festival", "conference", "fair", "meetup", "gathering"),
    ("birthday", "anniversary", "date", "celebrate", "party"),
    ("game", "gaming", "tournament", "console", "videogame"),
    ("contact", "email", "phone", "number", "address"),
    ("outdoor", "outdoors", "nature", "camping", "camp", "hike", "hiking", "trail", "campfire"),
    (
        "volunteer",
        "volunteering",
        "charity",
        "donate",
        "donation",
        "shelter",
        "fundraiser",
        "nonprofit",
    ),
)

_WORD = re.compile(r"[^\W\d_]+(?:'s)?")
_SENTENCE_END = re.compile(r"[.!?]\s+")


@functools.cache
def _related_by_stem() -> dict[str, frozenset[str]]:
    """Each stemmed word of the table with the stems of every word it shares a group with."""
    related: dict[str, set[str]] = {}
    for group in RELATED_GROUPS:
        stems = {stem(word) for word in group}
        for word_stem in stems:
            related.setdefault(word_stem, set()).update(stems - {word_stem})
    return {key: frozenset(value) for key, value in related.items()}


def terms_related(terms: Iterable[str]) -> set[str]:
    """``terms`` (stemmed, as ``tokenize`` gives them) with every term the table relates to
    them: what a query reaches beyond its own words, for a reader that has no index."""
    related = _related_by_stem()
    found = set(terms)
    for term in list(found):
        found |= related.get(term, frozenset())
    return found


def words_related(terms: Iterable[str]) -> list[str]:
    """The words of the table (as written, not stemmed) that share a group with one of
    ``terms`` (stemmed) and are not themselves one of them, sorted: what a database's
    full-text search is also asked for, since it matches words, not stems."""
    wanted = set(terms)
    words = {
        word
        for group in RELATED_GROUPS
        if wanted & {stem(word) for word in group}
        for word in group
        if stem(word) not in wanted
    }
    return sorted(words)


def query_weights(query: str, *, bm25: BM25Index) -> dict[str, float]:
    """The query's terms with weight 1 per occurrence, plus their sub-word and related terms
    at ``SUBWORD_WEIGHT`` and ``RELATED_WEIGHT`` (only terms the index holds count), in an
    order of their own, not of a set's hashes: scores add up term by term in this order, and
    the same query must score alike to the last bit in every process."""
    weights: dict[str, float] = dict(Counter(tokenize(query)))
    related = _related_by_stem()
    for term in list(weights):
        for compound in sorted(bm25.compounds(term)):
            weights[compound] = max(weights.get(compound, 0.0), SUBWORD_WEIGHT)
        for other in sorted(related.get(term, ())):
            if bm25.document_frequency(other):
                weights[other] = max(weights.get(other, 0.0), RELATED_WEIGHT)
    return weights


def feedback_weights(
    weights: dict[str, float], *, bm25: BM25Index, scores: np.ndarray
) -> dict[str, float]:
    """``weights`` with the ``FEEDBACK_TERMS`` best terms of the ``FEEDBACK_DOCUMENTS``
    best-scoring documents added at ``FEEDBACK_WEIGHT`` (or raised by it).

    A term's value is its count in each of those documents times its IDF times the document's
    score relative to the best one, summed; the query's own terms are not candidates, nor terms
    in more than half of all documents ("user" is in nearly every memory: it says nothing).
    """
    if not scores.size or scores.max() <= 0:
        return weights
    top = np.argsort(-scores, kind="stable")[:FEEDBACK_DOCUMENTS]
    best = float(scores[top[0]])
    values: Counter[str] = Counter()
    common = len(bm25) / 2
    for slot in top:
        share = float(scores[slot]) / best
        if share <= 0:
            continue
        for term, count in bm25.document_terms(int(slot)).items():
            if term not in weights and bm25.document_frequency(term) <= common:
                values[term] += count * bm25.idf(term) * share
    expanded = dict(weights)
    for term, _value in sorted(values.items(), key=lambda item: (-item[1], item[0]))[
        :FEEDBACK_TERMS
    ]:
        expanded[term] = expanded.get(term, 0.0) + FEEDBACK_WEIGHT
    return expanded


def query_names(query: str) -> set[str]:
    """The index terms of the names the query mentions: capitalised words that do not open a
    sentence and are not function words ("Caroline" in "What did Caroline research?")."""
    names: set[str] = set()
    for sentence in _SENTENCE_END.split(query):
        for word in _WORD.findall(sentence)[1:]:
            word = word.removesuffix("'s")
            if word[:1].isupper() and word[1:].islower() and word.casefold() not in STOPWORDS:
                names.update(tokenize(word))
    return names
