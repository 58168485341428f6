import pytest
from google.genai import types

from agents_app.runtime.context import SUMMARY_PREFIX
from agents_app.runtime.offline import QUOTE_CHARS, OfflineModel
from agents_app.runtime.tools import SET_STATE_TOOL
from core.llm import ATTACHMENT_LABEL_PREFIX, AttachmentInfo, LlmChunk, LlmRequest, MemorySnippet

MODEL = OfflineModel(chunk_delay=0)
CREATE = types.FunctionDeclaration(name="create_memory")
LOAD = types.FunctionDeclaration(name="load_memory")
PAST = types.FunctionDeclaration(name="search_past_conversations")
ALL_TOOLS = [CREATE, LOAD, PAST, SET_STATE_TOOL.declaration]


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def request(text: str, tools=(), **kwargs) -> LlmRequest:
    return LlmRequest(
        model="offline", system_instruction="", contents=[user(text)], tools=list(tools), **kwargs
    )


def call_of(decision):
    assert isinstance(decision, LlmChunk), decision
    [call] = decision.function_calls
    return call.name, call.args


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Remember that I am allergic to peanuts.",
            ("create_memory", {"text": "I am allergic to peanuts", "asked": True}),
        ),
        (
            "please remember my flight is on Friday",
            ("create_memory", {"text": "my flight is on Friday", "asked": True}),
        ),
        ("What do you know about my diet?", ("load_memory", {"query": "my diet"})),
        ("what do you remember", ("load_memory", {"query": "what do you remember"})),
        (
            "Where did I say I keep the spare key?",
            ("search_past_conversations", {"query": "I keep the spare key"}),
        ),
        (
            "did I ever mention my sister Ana",
            ("search_past_conversations", {"query": "my sister Ana"}),
        ),
        ("Hi, my name is Ada and I code", ("set_state", {"key": "user:name", "value": "Ada"})),
        ("set mood to happy", ("set_state", {"key": "mood", "value": "happy"})),
        ("Set user:city = Paris.", ("set_state", {"key": "user:city", "value": "Paris"})),
    ],
)
def test_rules_call_the_offered_tool(text, expected):
    assert call_of(MODEL.respond(request(text, ALL_TOOLS))) == expected


def test_without_the_tool_on_offer_it_just_replies():
    assert MODEL.respond(request("remember that I like tea")) == (
        "You said: \u201cremember that I like tea\u201d."
    )


def test_reply_is_grounded_in_state_and_the_memory_that_bears_on_the_message():
    memories = [
        MemorySnippet(id="1", text="The user lives in Lyon.", score=0.9),
        MemorySnippet(id="2", text="The user likes green tea.", score=0.8),
    ]
    decision = MODEL.respond(
        request("Any tea for tonight?", state={"user:name": "Ada"}, memories=memories)
    )
    assert decision == (
        "Hi Ada! You said: \u201cAny tea for tonight?\u201d I remember that you like green tea."
    )


def test_an_unrelated_memory_is_not_cited():
    memories = [MemorySnippet(id="1", text="The user lives in Lyon.", score=0.9)]

    decision = MODEL.respond(request("Write a haiku about autumn leaves.", memories=memories))

    assert decision == "You said: \u201cWrite a haiku about autumn leaves.\u201d"


def test_a_memory_related_to_the_message_beyond_its_words_is_cited():
    """Retrieval relates a snack to a peanut allergy; the reply says why it was brought up."""
    memories = [MemorySnippet(id="1", text="The user is allergic to peanuts.", score=0.9)]

    decision = MODEL.respond(request("Can you suggest a snack?", memories=memories))

    assert decision == (
        "You said: \u201cCan you suggest a snack?\u201d I remember that you are allergic to "
        "peanuts."
    )


@pytest.mark.parametrize(
    ("asked", "stored", "reply"),
    [
        (
            "Where do I live?",
            "The user lives in Porto, having moved there last week.",
            "You said: \u201cWhere do I live?\u201d I remember that you live in Porto, having "
            "moved there last week.",
        ),
        (
            "Where do I live?",
            "I live in Porto",
            "You said: \u201cWhere do I live?\u201d I remember that you live in Porto.",
        ),
        (
            "Do I eat meat? I live in Lisbon",
            "The user lives in Lisbon and they are vegetarian.",
            "You said: \u201cDo I eat meat? I live in Lisbon\u201d. I remember that you live in "
            "Lisbon and you are vegetarian.",
        ),
        (
            "Am I vegetarian?",
            "The user lives in Lisbon and is vegetarian.",
            "You said: \u201cAm I vegetarian?\u201d I remember that you live in Lisbon and are "
            "vegetarian.",
        ),
        (
            "What about my sister?",
            "The user's sister Ana lives in Braga.",
            "You said: \u201cWhat about my sister?\u201d I remember that your sister Ana lives "
            "in Braga.",
        ),
    ],
)
def test_what_the_offline_model_remembers_is_said_in_the_second_person(asked, stored, reply):
    memories = [MemorySnippet(id="1", text=stored, score=0.5)]

    assert MODEL.respond(request(asked, memories=memories)) == reply


def tool_turn(*results: tuple[str, dict], calls: tuple[tuple[str, dict], ...] = ()) -> LlmRequest:
    """A request whose last content answers the model's tool calls with ``results``."""
    contents = [user("...")]
    if calls:
        contents.append(
            types.Content(
                role="model",
                parts=[
                    types.Part(function_call=types.FunctionCall(name=name, args=args))
                    for name, args in calls
                ],
            )
        )
    contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part(function_response=types.FunctionResponse(name=name, response=response))
                for name, response in results
            ],
        )
    )
    return LlmRequest(model="offline", system_instruction="", contents=contents)


def test_a_remembered_fact_is_said_back_to_the_user_as_a_person_would():
    """Issue 17: it was "Got it, I'll remember that The user's daughter's birthday is May 3rd.."."""
    decision = MODEL.respond(
        tool_turn(
            (
                "create_memory",
                {"status": "ok", "text": "The user's daughter's birthday is May 3rd."},
            )
        )
    )

    assert decision == "Got it \u2014 I'll remember that your daughter's birthday is May 3rd."


def test_a_saved_name_is_a_greeting_and_other_keys_say_their_value_and_reach():
    """Issue 17: it was "Saved user:name."."""
    name = tool_turn(
        ("set_state", {"status": "ok", "key": "user:name"}),
        calls=(("set_state", {"key": "user:name", "value": "Dana"}),),
    )
    colour = tool_turn(
        ("set_state", {"status": "ok", "key": "user:favourite_colour"}),
        calls=(("set_state", {"key": "user:favourite_colour", "value": "green"}),),
    )
    trip = tool_turn(
        ("set_state", {"status": "ok", "key": "trip"}),
        calls=(("set_state", {"key": "trip", "value": "Lisbon in May"}),),
    )

    assert MODEL.respond(name) == "Nice to meet you, Dana! I'll call you that in all your chats."
    assert MODEL.respond(colour) == (
        "Done: your favourite colour is now \u201cgreen\u201d, in all your chats."
    )
    assert MODEL.respond(trip) == "Done: in this chat, trip is now \u201cLisbon in May\u201d."


def test_recalled_memories_are_listed_in_the_second_person_with_doubt_when_unsure():
    decision = MODEL.respond(
        tool_turn(
            (
                "load_memory",
                {
                    "status": "ok",
                    "memories": [
                        {"text": "The user's name is Dana.", "confidence": 0.95},
                        {"text": "The user lives in Lisbon.", "confidence": 0.4},
                    ],
                },
            )
        )
    )

    assert decision == (
        "Here's what I remember:\n"
        "- Your name is Dana.\n"
        "- You live in Lisbon. (I'm not sure about this one.)"
    )


def test_a_failed_tool_is_an_apology_with_the_reason_in_one_sentence():
    decision = MODEL.respond(
        tool_turn(
            (
                "create_memory",
                {"status": "error", "message": "memory creation is off for this chat"},
            ),
            ("set_state", {"status": "error", "message": "bad key."}),
        )
    )

    assert decision == (
        "Sorry, I couldn't save that: memory creation is off for this chat. "
        "Sorry, I couldn't save that: bad key."
    )


def test_past_turns_are_said_with_their_chat_and_day_and_none_found_says_so():
    found = {
        "past_conversations": [
            {"chat_title": "House", "date": "3 May 2026", "excerpt": "The key is in the mailbox."}
        ]
    }
    decision = MODEL.respond(tool_turn(("search_past_conversations", found)))
    assert decision == (
        "Here's where you said it in your past chats:\n"
        "- In \u201cHouse\u201d on 3 May 2026, you said: \u201cThe key is in the mailbox.\u201d"
    )
    none = MODEL.respond(tool_turn(("search_past_conversations", {"past_conversations": []})))
    assert none == "I couldn't find that in your past chats."


def test_a_past_answer_is_said_with_the_question_it_answered():
    found = {
        "past_conversations": [
            {
                "chat_title": "Travel",
                "date": "3 May 2026",
                "in_reply_to": "Where are you flying next week?",
                "excerpt": "Lisbon, for a conference.",
            }
        ]
    }
    decision = MODEL.respond(tool_turn(("search_past_conversations", found)))
    assert decision == (
        "Here's where you said it in your past chats:\n"
        "- In \u201cTravel\u201d on 3 May 2026, you said: \u201cLisbon, for a conference.\u201d "
        "(in reply to \u201cWhere are you flying next week?\u201d)"
    )


def test_empty_recall_says_so():
    decision = MODEL.respond(tool_turn(("load_memory", {"memories": []})))
    assert decision == "I don't have anything remembered about that yet."


def test_a_quoted_question_gets_no_second_stop_and_a_memory_is_said_to_the_user():
    memories = [MemorySnippet(id="1", text="The user lives in Lyon.", score=0.5)]

    decision = MODEL.respond(
        request("Is it cold in Lyon?", state={"user:name": "Ada"}, memories=memories)
    )

    assert decision == (
        "Hi Ada! You said: \u201cIs it cold in Lyon?\u201d I remember that you live in Lyon."
    )


def test_summary_keeps_earlier_summary_lines_and_adds_one_per_turn():
    contents = [
        user(SUMMARY_PREFIX + "- User: first\n- Assistant: reply"),
        user("second   question"),
        types.Content(role="model", parts=[types.Part(text="second answer")]),
    ]
    decision = MODEL.respond(
        LlmRequest(model="offline", system_instruction="", contents=contents, purpose="summarize")
    )
    assert decision.splitlines() == [
        "- User: first",
        "- Assistant: reply",
        "- User: second question",
        "- Assistant: second answer",
    ]


async def test_stream_is_chunked_and_concatenates_to_the_reply():
    chunks = [
        chunk async for chunk in MODEL.generate_stream(request("one two three four five six seven"))
    ]
    texts = [chunk.text for chunk in chunks if chunk.text]
    assert len(texts) > 1
    assert "".join(texts) == "You said: \u201cone two three four five six seven\u201d."
    assert chunks[-1].usage_metadata.candidates_token_count > 0


async def test_tool_call_is_one_chunk_with_usage():
    chunks = [chunk async for chunk in MODEL.generate_stream(request("set a to b", ALL_TOOLS))]
    assert len(chunks) == 1 and chunks[0].function_calls[0].name == "set_state"


LOGO = AttachmentInfo(filename="logo.png", mime_type="image/png", size=2048)


def test_remember_this_about_attached_files_calls_no_tool_and_says_they_are_kept():
    """The memory job keeps the files (memory_app.extraction.files); a create_memory call
    would store "this logo" as a memory of its own."""
    decision = MODEL.respond(request("remember this logo", ALL_TOOLS, attachments=[LOGO]))

    assert decision == (
        "I received logo.png (a PNG image, 2 KB). "
        "Got it \u2014 I'll keep logo.png in your memories."
    )


def test_remember_this_in_a_chat_that_keeps_nothing_says_why():
    decision = MODEL.respond(
        request(
            "remember this",
            ALL_TOOLS,
            attachments=[LOGO],
            not_saved_reason="this is a temporary chat",
        )
    )

    assert decision.endswith("I have not saved them: this is a temporary chat.")


def test_remember_that_with_a_file_attached_is_still_a_fact_to_save():
    decision = MODEL.respond(request("remember that my cat is Miso", ALL_TOOLS, attachments=[LOGO]))

    assert call_of(decision) == ("create_memory", {"text": "my cat is Miso", "asked": True})


def with_file(text: str, info: AttachmentInfo, data: bytes) -> LlmRequest:
    """A request whose message carries one file as the runtime gives it: its label, its bytes."""
    label = f"{ATTACHMENT_LABEL_PREFIX}{info.filename}: {info.mime_type}, {info.size} bytes]"
    parts = [
        types.Part(text=text),
        types.Part(text=label),
        types.Part(inline_data=types.Blob(data=data, mime_type=info.mime_type)),
    ]
    return LlmRequest(
        model="offline",
        system_instruction="",
        contents=[types.Content(role="user", parts=parts)],
        tools=ALL_TOOLS,
        attachments=[info],
    )


def test_a_long_text_file_is_quoted_from_its_start_and_cut_with_an_ellipsis():
    text = "Line one of the notes.\n\n" + "word " * 200
    notes = AttachmentInfo(filename="notes.txt", mime_type="text/plain", size=len(text))

    decision = MODEL.respond(with_file("What does it say?", notes, text.encode()))

    quoted = decision.split("notes.txt says: \u201c", 1)[1]
    assert quoted.startswith("Line one of the notes. word word")
    assert quoted.endswith("\u2026\u201d") and len(quoted) == QUOTE_CHARS + 2


def test_a_question_about_an_image_says_the_file_was_received_and_quotes_nothing():
    decision = MODEL.respond(with_file("What does it say?", LOGO, b"\x89PNG not text"))

    assert decision.startswith("I received logo.png (a PNG image, 2 KB). ")
    assert "says: \u201c" not in decision
