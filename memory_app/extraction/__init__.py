"""Extraction: the facts worth remembering in a range of a session's events.

With ``LLM_PROVIDER`` configured, its model extracts them with structured output
(:func:`fact_schema`), guided by the app's topics and their few-shot examples; every event is
shown with its id and each fact cites the ids that support it. Without it, the offline rules
below extract them. Either way, every ``create_memory`` call the agent made yields a ``tool``
fact with the call's ``text`` (the agent asked for it explicitly), and no other tool output
yields anything.

Facts are written in the third person, "The user ..." (the memory is read later by an agent
talking to the user, and "I" would be ambiguous there). A fact has a ``kind``: a plain
``statement``; a ``correction``, which replaces what a similar memory says; or a
``retraction``, a negated statement that invalidates the memory it contradicts.

Offline rules, applied to the text of user-authored events only, sentence by sentence (a
sentence ends at ``.``, ``!``, ``?``, ``;`` or a line break, before "and (now) I", "but (now)
I", "and my", "but my", and before ", I", ", my", ", he", ", she", ", his" or ", her" when
more than an opening word precedes it, so "Actually, I ..." stays whole; a statement after
one opening word and a comma ("Second, I'm writing my thesis") is read without the word; a
leading "oh", "well", "so", "also", "but", "btw", "by the way", "ok", and an opening that
says nothing of the fact ("yeah", "perfect", "these days", "lately") are skipped, so is a
closing "by the way" or "though"; "my partner, Rui, is" reads "my partner Rui is"; "we're
going to ...", "we (don't) have ...", "we settled on / decided / chose / booked ..." read in
the first person; an opening "he", "she", "his", "her" or a name reads as the person or
animal of the user's life the conversation last named, when one fits ("my dad" then "he's
into woodworking" -> "my dad's into woodworking"; "a dog named Rex" then "Rex turned ten" ->
"my dog Rex turned ten"; "she" never stands for a brother); a statement standing further in a
sentence, after words that only lead into it ("Quick update on my life: I actually moved to
Wroclaw", "So after a lot of back and forth we finally moved to Denver", "Good news, Mia and I
got back together") is read too, but not after a request, a condition or reported words
("Write a story where I live in Rome", "if I move ..."); a sentence ending in "?" is a
question and yields nothing):

1. "remember (that) X", "please remember X", "don't forget (that) X", "keep in mind (that) X"
   (not "remember to/when/how/me/this/these/it/them ..."): X in the third person, topic
   ``explicit_instructions``, source ``explicit``, confidence 0.95, importance 0.8.
2. A correction marker opening the sentence ("actually", "correction", "sorry", "wait", "no,"
   before "I" or "my"; "I meant") or "is not X but Y" / "not in X but in Y" (the sentence is
   read with Y in place of X): the rest must be a first-person statement (rule 3); kind
   ``correction``, source ``explicit``, confidence 0.9.
3. First-person statements, "I" becoming "The user" and the verb agreeing ("I live" -> "The
   user lives", "I don't" -> "The user does not", later "my/me" -> "their/them", a second
   clause of the user's own sharing the subject: "I live in Lisbon and I'm vegetarian" ->
   "The user lives in Lisbon and is vegetarian"):
   - "my X is/are/was/has been Y" or "my X's Y" (not "my question/point/problem/guess/bad ..."):
     "The user's X is Y", topic ``preferences`` when X names a favourite, else ``personal_info``;
   - "I am / I'm Y" (Y not an "-ing" word, except "living/working/studying", which read as
     "lives/works/studies"; not a passing state: sorry, sure, fine, tired, ready, back, ...):
     "The user is Y", ``personal_info``;
   - "I (adverb) like/love/prefer/hate/dislike/enjoy/adore X" (X not it/that/this/you/how/
     what ...): ``preferences``;
   - "I (adverb) live/work/study/teach/own/have/speak/use/play/drive/eat/drink/cook X", "I
     moved/grew up/was born X" ("have" not followed by to/a question/no idea/been/got):
     ``personal_info``;
   - "my <relation> (<Name>) <verb> ..." for the people and animals in the user's life
     (sister, son, friend, boss, dog ...; "my X is Y" is read above): "The user's sister Ana
     lives in Braga", ``personal_info``; a negated one ("my son doesn't eat meat") is a
     retraction like the user's own;
   - "I'm planning/hoping/training/learning/preparing/saving ...", "I plan/hope to ...", "I'm
     going to visit/travel/move/start ...": "The user is planning to ...", a plan of the
     user's own life, ``key_conversation_details``;
   - what happened in the user's life, said in the past and kept as said: "I quit/sold/
     joined/started/accepted/bought/adopted/stopped/booked/finished/graduated/married/retired
     ...", "I used to ...", ``personal_info``; "I turned 35" -> "The user is 35"; a decision,
     "I settled on / decided / chose / picked ...", ``key_conversation_details``;
   - "I've been X" (not "-ing"): "The user has been X"; "I'm <doing> a/an/my/the ..." (not a
     passing "-ing": looking, trying, going ...): "The user is doing ..."; "I can't stand /
     get into X": "The user does not like X"; "I can read/speak/play/cook/swim/drive ...
     X", a skill (not "I can't log in", "I can help"): "The user can ..."; "please keep
     your answers short": "The user prefers short answers";
   - "I moved (from Y) to <Place> ..." with a named place (a capital letter; the place ends
     at a comma or before "last", "this", "for", "in 2019", "in May" ...): "The user lives in
     <Place>, having moved there (from Y) ...", so the move fills the "lives in" slot;
   - "I relocated (back) to <Place>" as "I moved"; "I've been living/working/studying ..."; "I
     gave up X", "I went back to X", "I left X", "I got a new job ...", "I became a ..." as
     life events; "I'm back at/to/on X" (not a passing "I'm back"); "I'm not <doing>
     anymore"; "<Name> and I ..." -> "The user and <Name> ..."; "(I think) X is my favourite
     Y" -> "The user's favourite Y is X";
   - "I (have) switched/changed (over) (from Y) to X": "The user switched from Y to X",
     ``preferences``, stated as lasting (source ``explicit``, confidence 0.9); without "from",
     Y is what an earlier sentence of the same message said the user no longer likes ("I
     don't like coffee anymore, I switched to green tea"). Consolidation makes it an update
     of the preference it replaces.
   Plain statements are source ``implicit``, confidence 0.8. A negated one ("I don't ...", "I
   never ...", "I am not ...", "my X is not ...") is kind ``retraction``; when the change is
   stated as lasting ("no longer", "anymore") it is also source ``explicit``, confidence 0.9.
4. An answer with no subject of its own, read through the assistant's question about the
   user's life it answers (:mod:`.offline.answers`): "What do you drink instead?" then
   "Mostly rooibos in the afternoon." -> "The user mostly drinks rooibos in the afternoon.";
   only "what/where/how do/are/will you <verb>" questions (not "want", "think", "know", "how
   are you doing" ...), only a short answer that is no question, small talk, yes or no,
   request ("Write ...") or first-person statement; source ``implicit``, confidence 0.7.
5. Nothing else is kept. A request to forget (``facts.FORGET_REQUEST``: "forget that ...",
   "don't remember ...", "delete what you know about my ..."; the agent's ``forget_memory``
   acts on it) yields no fact, whoever extracts. A request, a question, a task, small talk (a
   sentence made only of greeting, thanks, asking-after and leave-taking words, or names
   beside one, see ``offline.patterns.SMALL_TALK_WORDS``) and the assistant's answers are
   what was said, not facts about the person: they stay in the session store (past
   conversations) and never become memories. A model's fact that only records one ("The
   user asked for a haiku") is dropped too (:func:`memory_app.extraction.facts.fact_is_request`).
   A fact whose topic the app turned off is dropped.

Context: a job's events are read with what came before them in the conversation
(:class:`ExtractionContext`: the compaction's rolling summary and the turns between it and the
batch, bounded), which is never extracted itself: offline, the earlier turns tell the rules the
assistant's last question (rule 4) and the people "he", "she" or a name stand for; the model
gets both ahead of the transcript, marked as context.

Attached files (:mod:`memory_app.extraction.files`): the model reads them and may draw facts from
them (the file is the fact's source) or keep one as the memory's own file; the offline rules
keep a file only when the user's message asks to remember it ("remember this logo").

Importance: 0.8 for explicit instructions, 0.7 for personal information, 0.5 otherwise.
"""

from __future__ import annotations

from django.conf import settings

from core.llm import provider_configured
from memory_app.extraction.facts import (
    CREATE_MEMORY_TOOL,
    FORGET_REQUEST,
    ExtractedFact,
    ExtractionContext,
    FactFile,
    FactKind,
)
from memory_app.extraction.files import attached_files_read, facts_kept_offline
from memory_app.extraction.model import facts_from_model
from memory_app.extraction.offline import (
    fact_is_turn_record,
    fact_negated,
    fact_subject,
    fact_switch,
    fact_text_normalise,
    fact_topic,
    facts_from_offline_rules,
    facts_from_tool_calls,
    user_text_normalise,
)
from memory_app.ranking import tokenize
from memory_app.topics import TopicSpec
from sessions_app.events import Event


def memory_model_configured() -> bool:
    """Whether generation (extraction, consolidation) calls a model: ``LLM_PROVIDER`` has its
    access configured and ``MEMORY_EXTRACTION_MODEL`` is not ``offline`` (which keeps the
    offline rules, e.g. to measure them against a model-answered benchmark)."""
    return provider_configured() and settings.MEMORY_EXTRACTION_MODEL != "offline"


def _not_saved_already(*, facts: list[ExtractedFact], events: list[Event]) -> list[ExtractedFact]:
    """``facts`` less those the agent already saved in the same turn with ``create_memory``:
    a fact of a user message whose words all occur in what a ``create_memory`` call of that
    invocation saved ("remember my email is ... and my phone is ..." saved whole, so no second
    "phone" memory)."""
    saved: dict[str, set[str]] = {}
    for event in events:
        for call in event.get_function_calls():
            text = (call.args or {}).get("text")
            if call.name == CREATE_MEMORY_TOOL and isinstance(text, str):
                saved.setdefault(event.invocation_id, set()).update(tokenize(text))
    if not saved:
        return facts
    invocation_of = {event.id: event.invocation_id for event in events}

    def covered(fact: ExtractedFact) -> bool:
        words = saved.get(invocation_of.get(fact.event_ids[0], ""), set())
        terms = set(tokenize(fact.excerpt or fact.text)) - {"rememb", "forget"}
        return bool(words) and bool(terms) and terms <= words

    return [fact for fact in facts if not covered(fact)]


def _not_asked_to_forget(*, facts: list[ExtractedFact], events: list[Event]) -> list[ExtractedFact]:
    """``facts`` less those drawn only from requests to forget ("forget that my sister lives
    in Braga" names a fact so that it goes, not so that it is kept)."""
    forgetting = {
        event.id
        for event in events
        if event.author == "user"
        and event.content
        and FORGET_REQUEST.match(
            " ".join(part.text for part in event.content.parts or () if part.text)
        )
    }
    if not forgetting:
        return facts
    return [fact for fact in facts if not set(fact.event_ids) <= forgetting]


def facts_extract(
    *,
    app_name: str,
    events: list[Event],
    topics: list[TopicSpec],
    user_pk: int | None = None,
    context: ExtractionContext | None = None,
) -> list[ExtractedFact]:
    """The facts in ``events`` worth remembering for ``app_name``, in event order.

    The model when it is configured, the offline rules otherwise, plus one ``tool`` fact per
    ``create_memory`` call. With ``user_pk`` (the events' user), the files attached to the
    user's messages are read too: the model gets them as parts and may draw facts from them or
    keep them; offline, an explicit "remember this" keeps them
    (:mod:`memory_app.extraction.files`). Only facts of the given (enabled) topics are
    returned. ``context``: what came before ``events`` in the conversation (the rolling
    summary and the turns before them), which both paths read to understand ``events`` and
    neither extracts from. Model errors propagate as ``ModelError``: transient ones are for
    the job layer to retry.
    """
    topic_keys = {topic.key for topic in topics}
    files = (
        attached_files_read(app_name=app_name, user_pk=user_pk, events=events)
        if user_pk is not None
        else {}
    )
    if memory_model_configured():
        facts = facts_from_model(
            app_name=app_name, events=events, topics=topics, files=files, context=context
        )
    else:
        facts = facts_from_offline_rules(events=events, context=context) + facts_kept_offline(
            events=events, files=files
        )
    facts = _not_saved_already(facts=facts, events=events)
    facts = _not_asked_to_forget(facts=facts, events=events)
    facts += facts_from_tool_calls(events=events)
    position = {event.id: index for index, event in enumerate(events)}
    facts.sort(key=lambda fact: position[fact.event_ids[0]])
    return [fact for fact in facts if fact.topic in topic_keys]


__all__ = [
    "ExtractedFact",
    "ExtractionContext",
    "FactFile",
    "FactKind",
    "fact_is_turn_record",
    "fact_negated",
    "fact_subject",
    "fact_switch",
    "fact_text_normalise",
    "fact_topic",
    "facts_extract",
    "memory_model_configured",
    "user_text_normalise",
]
