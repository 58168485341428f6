"""Extraction: the facts worth remembering in a range of a session's events.

With Gemini configured, the model extracts them with structured output (:func:`fact_schema`),
guided by the app's topics and their few-shot examples; every event is shown with its id and
each fact cites the ids that support it. Without Gemini, the offline rules below extract them.
Either way, every ``create_memory`` call the agent made yields a ``tool`` fact with the call's
``text`` (the agent asked for it explicitly), and no other tool output yields anything.

Facts are written in the third person, "The user ..." (the memory is read later by an agent
talking to the user, and "I" would be ambiguous there). A fact has a ``kind``: a plain
``statement``; a ``correction``, which replaces what a similar memory says; or a
``retraction``, a negated statement that invalidates the memory it contradicts.

Offline rules, applied to the text of user-authored events only, sentence by sentence (a
sentence ends at ``.``, ``!``, ``?``, ``;`` or a line break, before "and I", "but I", "and
my", "but my", and before ", I" or ", my" when more than an opening word precedes it, so
"Actually, I ..." stays whole; a leading "oh", "well", "so", "also", "btw", "by the way",
"ok" is skipped):

1. "remember (that) X", "please remember X", "don't forget (that) X", "keep in mind (that) X"
   (not "remember to/when/how/me/this/these/it/them ..."): X in the third person, topic
   ``explicit_instructions``, source ``explicit``, confidence 0.95, importance 0.8.
2. A correction marker opening the sentence ("actually", "correction", "sorry", "wait", "no,"
   before "I" or "my"; "I meant") or "is not X but Y" / "not in X but in Y" (the sentence is
   read with Y in place of X): the rest must be a first-person statement (rule 3); kind
   ``correction``, source ``explicit``, confidence 0.9.
3. First-person statements, "I" becoming "The user" and the verb agreeing ("I live" -> "The
   user lives", "I don't" -> "The user does not", later "my/me/I" -> "their/them/they"):
   - "my X is/are/was Y" or "my X's Y" (not "my question/point/problem/guess/bad ..."):
     "The user's X is Y", topic ``preferences`` when X names a favourite, else ``personal_info``;
   - "I am / I'm Y" (Y not an "-ing" word, except "living/working/studying", which read as
     "lives/works/studies"; not a passing state: sorry, sure, fine, tired, ready, back, ...):
     "The user is Y", ``personal_info``;
   - "I (adverb) like/love/prefer/hate/dislike/enjoy/adore X" (X not it/that/this/you/how/
     what ...): ``preferences``;
   - "I (adverb) live/work/study/teach/own/have/speak/use/play/drive/eat/drink/cook X", "I
     moved/grew up/was born X" ("have" not followed by to/a question/no idea/been/got):
     ``personal_info``;
   - "I moved (from Y) to <Place> ..." with a named place (a capital letter; the place ends
     at a comma or before "last", "this", "for", "in 2019", "in May" ...): "The user lives in
     <Place>, having moved there (from Y) ...", so the move fills the "lives in" slot;
   - "I (have) switched/changed (over) (from Y) to X": "The user switched from Y to X",
     ``preferences``, stated as lasting (source ``explicit``, confidence 0.9); without "from",
     Y is what an earlier sentence of the same message said the user no longer likes ("I
     don't like coffee anymore, I switched to green tea"). Consolidation makes it an update
     of the preference it replaces.
   Plain statements are source ``implicit``, confidence 0.8. A negated one ("I don't ...", "I
   never ...", "I am not ...", "my X is not ...") is kind ``retraction``; when the change is
   stated as lasting ("no longer", "anymore") it is also source ``explicit``, confidence 0.9.
4. Key conversation details: a user turn whose sentences that yielded nothing under rules 1-3
   are substantive together is kept whole, as a record of what was said and when: topic
   ``key_conversation_details``, source ``implicit``, confidence 0.8, importance 0.5, its event
   the only source. Its text is "[<date>] <speaker>: <turn>": the date of the event's timestamp
   in UTC ("8 May 2023"), the speaker the event's ``custom_metadata["speaker"]`` when it is a
   non-empty string (an imported transcript names its speakers), else "User"; the whole turn on
   one line (the facts it stated in context), at most 500 characters. Text is substantive when
   it has at least 3 index terms (``memory_app.ranking.tokenize``: function words, greetings
   and fillers such as "hey", "yeah", "wow" do not count, so "Hi Mel!" or "Thanks, that's
   great!" are not) and is not questions only (every sentence ending in "?"). So a turn that
   only states a fact ("I live in Lisbon") yields that fact alone. Without a model, rules 1-3
   keep only a few first-person statements; the plans, events and outcomes a conversation is
   mostly made of would otherwise be lost. The date and the speaker let the memory answer
   "when" and "who" questions later (on LoCoMo, the date alone lifts temporal recall@5 from
   0.65 to 0.86 on one conversation).
   Small talk yields nothing and does not count towards a record: a sentence made only of
   greeting, thanks, asking-after and leave-taking words ("Hi there!", "Hello, how are you?",
   "Good morning! How's your day going?", "I'm doing great, thanks for asking!", "Bye, talk to
   you later!"), and names beside a greeting, thanks or farewell word ("Hey Caroline!"), see
   ``offline.patterns.SMALL_TALK_WORDS``. A turn of small talk alone is not kept; a greeting
   before news ("Good morning! I'm training for a marathon.") keeps the whole turn.
5. Anything else yields nothing. A fact whose topic the app turned off is dropped.

Attached files (:mod:`memory_app.extraction.files`): Gemini reads them and may draw facts from
them (the file is the fact's source) or keep one as the memory's own file; the offline rules
keep a file only when the user's message asks to remember it ("remember this logo").

Importance: 0.8 for explicit instructions, 0.7 for personal information, 0.5 otherwise.
"""

from __future__ import annotations

from django.conf import settings

from core.llm import gemini_configured
from memory_app.extraction.facts import CREATE_MEMORY_TOOL, ExtractedFact, FactFile, FactKind
from memory_app.extraction.files import attached_files_read, facts_kept_offline
from memory_app.extraction.gemini import facts_from_gemini
from memory_app.extraction.offline import (
    fact_is_turn_record,
    fact_negated,
    fact_subject,
    fact_switch,
    fact_text_normalise,
    fact_topic,
    facts_from_offline_rules,
    facts_from_tool_calls,
)
from memory_app.ranking import tokenize
from memory_app.topics import TopicSpec
from sessions_app.events import Event


def memory_model_configured() -> bool:
    """Whether generation (extraction, consolidation) calls Gemini: a key or Vertex AI is set
    and ``MEMORY_EXTRACTION_MODEL`` is not ``offline`` (which keeps the offline rules, e.g. to
    measure them against a Gemini-answered benchmark)."""
    return gemini_configured() and settings.MEMORY_EXTRACTION_MODEL != "offline"


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


def facts_extract(
    *, app_name: str, events: list[Event], topics: list[TopicSpec], user_pk: int | None = None
) -> list[ExtractedFact]:
    """The facts in ``events`` worth remembering for ``app_name``, in event order.

    Gemini when it is configured, the offline rules otherwise, plus one ``tool`` fact per
    ``create_memory`` call. With ``user_pk`` (the events' user), the files attached to the
    user's messages are read too: Gemini gets them as parts and may draw facts from them or
    keep them; offline, an explicit "remember this" keeps them
    (:mod:`memory_app.extraction.files`). Only facts of the given (enabled) topics are
    returned. Model errors propagate as ``ModelError``: transient ones are for the job layer
    to retry.
    """
    topic_keys = {topic.key for topic in topics}
    files = (
        attached_files_read(app_name=app_name, user_pk=user_pk, events=events)
        if user_pk is not None
        else {}
    )
    if memory_model_configured():
        facts = facts_from_gemini(app_name=app_name, events=events, topics=topics, files=files)
    else:
        facts = facts_from_offline_rules(events=events) + facts_kept_offline(
            events=events, files=files
        )
    facts = _not_saved_already(facts=facts, events=events)
    facts += facts_from_tool_calls(events=events)
    position = {event.id: index for index, event in enumerate(events)}
    facts.sort(key=lambda fact: position[fact.event_ids[0]])
    return [fact for fact in facts if fact.topic in topic_keys]


__all__ = [
    "ExtractedFact",
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
]
