"""Consolidation: extracted facts merged into a user's memories, in one transaction.

For each fact, in order:

1. Safety (:mod:`memory_app.safety`): a refused text becomes a *quarantined* memory (secrets
   masked, PII redacted, the reason kept, a "quarantined" revision), never an active one. The
   same text already quarantined or rejected for the user gets the fact's sources, no second
   row.
2. The text is normalised (third person, see :func:`fact_text_normalise`) and PII redacted per
   the app's setting.
3. Similar memories: the user's active user-scope memories of the app, ranked by BM25 over
   the fact's text (``memory_app.ranking``, plus cosine when the embedder gives vectors);
   every ranked memory is compared on index-term overlap (Jaccard) and cosine:
   - a *duplicate* has the same polarity (both negated or neither), Jaccard >= 0.8 or cosine
     >= 0.95 (or the same text), and no conflicting value of the same subject;
   - a *related* memory has Jaccard >= 0.5 or cosine >= 0.8.
4. The decision, first match wins:
   a. duplicate: merge. The fact's events not yet linked become sources; confidence rises by
      0.05 (at least to the fact's), a more trusted source type is adopted; a
      "sources_changed" revision. Nothing at all when every event is already linked: this is
      what makes a second run of the same facts a no-op.
   b. a related memory of opposite polarity ("The user does not like coffee" against "The
      user likes coffee", or the reverse) is contradicted: it is INVALIDATED (status
      invalidated, an "invalidated" revision), then the fact goes on to c-f.
   c. a fact with a single-valued subject (:func:`fact_subject`: "The user lives in ...")
      UPDATES the latest memory with that subject (an "updated" revision with before and
      after; reason "corrected by the user" for a ``correction``, else "newer information");
   d. a switch (:func:`memory_app.extraction.fact_switch`: "The user switched from coffee to
      tea") UPDATES the preference it replaces: the latest active, affirmative preference
      holding every index term of what the user switched from, or with no "from", one term of
      what they switched to;
   e. a ``correction`` without such a memory UPDATES the most related memory of the same
      polarity;
   f. otherwise: CREATE a memory.
   An update or invalidation happens only when the fact wins the conflict. Between two
   statements of the person (explicit or implicit: asked to remember or not) the newer wins
   (event timestamps: the fact's newest event against the memory's newest source), so "I
   moved to Porto" corrects an explicit "remember that I live in Lisbon". Otherwise a more
   trusted source type wins (bootstrapped > explicit > implicit > tool), which keeps tool
   output from overriding the person, and with equal trust the newer wins. A correction or
   retraction also wins a tie in time (it was said in the same message). A losing fact
   changes nothing and is not linked as a source of a memory it contradicts. The revision's
   reason tells the person what changed it: "You said on 26 Nov that you live in Porto."

Records of whole turns (offline rule 4, :func:`memory_app.extraction.fact_is_turn_record`:
"[8 May 2023] Caroline: ...") are append-only: what was said on a day stays true as a record
even when a later turn says otherwise, and their many words make them look related to almost
any fact. So a record is merged only into an active record of the same words (case and
punctuation aside; step a, sources added) and otherwise created; it never invalidates,
updates or merges into a fact, and no fact ever invalidates, updates or merges into a record.

Every write (memories with embeddings, revisions with the acting job or person, source links
to the session's ``EventRecord`` rows with their excerpts) happens in one transaction: a
failure leaves the memories as they were. Texts are embedded before that transaction, by
:func:`consolidation_prepare`, which a caller that takes the user's lock runs before taking it:
the embedder may be a network call.
A fact already applied to a memory that a later fact invalidated (same text, same events) is
not applied again, so re-running a job never brings back an invalidated memory.

Where it lives:

- ``preparation``: :func:`consolidation_prepare` (third person, safety, redaction, vectors),
  run before any memory is read;
- ``matching``: the user's active memories during the run and the similarity of a fact to
  them (step 3, the preference a switch replaces, turn records by their words);
- ``decisions``: the decision for each fact (step 4 and the conflict rule) and
  :func:`memories_consolidate`, which applies them in one transaction;
- ``writes``: the writes (create, merge, update, invalidate, quarantine) with their revisions
  and source links, and :class:`ConsolidationReport`.
"""

from memory_app.consolidation.decisions import (
    DUPLICATE_COSINE,
    DUPLICATE_JACCARD,
    RELATED_COSINE,
    RELATED_JACCARD,
    memories_consolidate,
)
from memory_app.consolidation.matching import CANDIDATES
from memory_app.consolidation.preparation import (
    PreparedFact,
    PreparedFacts,
    consolidation_prepare,
)
from memory_app.consolidation.writes import MERGE_CONFIDENCE_STEP, ConsolidationReport

__all__ = [
    "CANDIDATES",
    "DUPLICATE_COSINE",
    "DUPLICATE_JACCARD",
    "MERGE_CONFIDENCE_STEP",
    "RELATED_COSINE",
    "RELATED_JACCARD",
    "ConsolidationReport",
    "PreparedFact",
    "PreparedFacts",
    "consolidation_prepare",
    "memories_consolidate",
]
