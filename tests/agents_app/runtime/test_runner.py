import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.runtime.agents import AgentConfig, CompactionConfig
from agents_app.runtime.memory_hooks import MemoryPermissions, NoMemoryProvider
from agents_app.runtime.offline import OfflineModel
from agents_app.runtime.runner import DuplicateTurnError, Runner
from agents_app.runtime.tools import Tool, ToolContext
from core.async_database import NOTHING_READ, StoreRead
from core.background import background_wait_idle
from core.llm import LlmChunk, LlmRequest, MemorySnippet, ModelError, RetryPolicy
from sessions_app import selectors, services
from sessions_app.errors import InvalidEventError
from sessions_app.models import EventRecord, SessionState
from sessions_app.types import GetSessionConfig
from tests.factories import UserFactory, session_key

pytestmark = pytest.mark.django_db(transaction=True)

APP = "chat"
FAST_RETRIES = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002)


class RecordingModel:
    """The offline model, keeping every request it was sent."""

    name = "recording"
    offline = True

    def __init__(self, chunk_delay: float = 0) -> None:
        self.inner = OfflineModel(chunk_delay=chunk_delay)
        self.requests: list[LlmRequest] = []

    async def generate_stream(self, request):
        self.requests.append(request)
        async for chunk in self.inner.generate_stream(request):
            yield chunk


class ScriptedFailures:
    """Fails with the given errors first (one per call), then answers like the offline model."""

    name = "failing"
    offline = False

    def __init__(self, *errors: ModelError, after_text: str = "") -> None:
        self.errors = list(errors)
        self.after_text = after_text
        self.calls = 0

    async def generate_stream(self, request):
        self.calls += 1
        if self.errors:
            error = self.errors.pop(0)
            if self.after_text:
                yield LlmChunk(text=self.after_text)
            raise error
        yield LlmChunk(text="recovered")


class StaticMemory:
    """A memory provider with fixed memories and in-memory created facts."""

    def __init__(self, *, use=True, create=True) -> None:
        self.allowed = MemoryPermissions(use=use, create=create)
        self.created: list[str] = []
        self.completed: list[str] = []
        self.memories = [
            MemorySnippet(id="m1", text="you like green tea", confidence=0.9, score=1.0)
        ]

    async def permissions(self, *, session):
        return self.allowed

    def permissions_read(self, *, app_name, user_id, session_id):
        return NOTHING_READ

    def permissions_taken(self, *, session, answer):
        return self.allowed

    async def preload(self, *, session, query, limit):
        return self.memories[:limit]

    async def app_guidance(self, *, session):
        return []

    def tools(self):
        async def create(args, context: ToolContext):
            self.created.append(args["text"])
            return {"status": "ok", "text": args["text"]}

        async def load(args, context: ToolContext):
            context.memories_used.extend(self.memories)
            return {
                "memories": [{"text": m.text, "confidence": m.confidence} for m in self.memories]
            }

        return [
            Tool(types.FunctionDeclaration(name="create_memory"), create),
            Tool(types.FunctionDeclaration(name="load_memory"), load),
        ]

    def turn_trigger_read(self, *, app_name, user_id, session_id, invocation_id):
        return StoreRead([], lambda results: invocation_id)

    async def turn_completed(self, *, session, invocation_id, facts=None):
        assert facts == invocation_id  # read with the final event, not again
        self.completed.append(invocation_id)


@pytest.fixture
def owner(transactional_db):
    """Created on the main thread: an async fixture's database context would leak into teardown."""
    return UserFactory()


async def new_session(user, **state):
    return await sync_to_async(services.session_create)(
        app_name=APP, user_id=str(user.pk), state=state
    )


async def app_compaction_set(config: CompactionConfig) -> None:
    """The app's record carries the compaction, as staff set it in the console: the background
    task reads the agent from the record, not from the runner that asked for it."""
    from agents_app.models import App

    await sync_to_async(App.objects.update_or_create)(
        name=APP,
        defaults={
            "model": "offline",
            "keep_last_invocations": config.keep_last_invocations,
            "token_budget": config.token_budget,
            "summarize_after_invocations": config.summarize_after_invocations,
        },
    )


def make_runner(model=None, memory=None, **agent_fields):
    agent = AgentConfig(app_name=APP, model="offline", **agent_fields)
    return Runner(
        agent=agent,
        model=model or RecordingModel(),
        memory=memory or NoMemoryProvider(),
        retry_policy=FAST_RETRIES,
    )


async def turn(runner, user, session_id, text, client_message_id=None):
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(
            user_id=str(user.pk),
            session_id=session_id,
            new_message=message,
            client_message_id=client_message_id,
        )
    ]


async def stored(user, session_id, **config):
    session = await sync_to_async(selectors.session_get)(
        app_name=APP, user_id=str(user.pk), session_id=session_id, config=GetSessionConfig(**config)
    )
    return session


async def test_a_turn_stores_user_and_reply_and_streams_partials_in_between(owner):
    session = await new_session(owner)
    events = await turn(make_runner(), owner, session.id, "hello there friend")

    assert events[0].author == "user" and not events[0].partial
    partials = [event for event in events if event.partial]
    assert len(partials) > 1
    final = events[-1]
    assert "".join(event.text() for event in partials) == final.text()
    assert {event.id for event in partials} == {final.id}
    assert final.turn_complete and final.custom_metadata["context"]["event_count"] == 1

    history = (await stored(owner, session.id)).events
    assert [event.author for event in history] == ["user", "assistant"]
    assert history[-1].text() == "You said: \u201chello there friend\u201d."


async def test_tool_calls_change_state_through_the_response_event(owner):
    session = await new_session(owner)
    events = await turn(make_runner(), owner, session.id, "my name is Ada")
    stored_events = [event for event in events if not event.partial]
    assert [event.author for event in stored_events] == [
        "user",
        "assistant",
        "assistant",
        "assistant",
    ]
    assert stored_events[1].get_function_calls()[0].name == "set_state"
    assert stored_events[2].actions.state_delta == {"user:name": "Ada"}
    assert (await stored(owner, session.id)).state == {"user:name": "Ada"}

    events = await turn(make_runner(), owner, session.id, "how are you")
    assert events[-1].text().startswith("Hi Ada!")


async def test_tool_call_and_result_events_say_their_step_as_a_person_reads_it(owner):
    """The chat and the staff console show these lines instead of the calls' JSON."""
    session = await new_session(owner)

    events = await turn(make_runner(), owner, session.id, "my name is Ada")

    call_event, result_event = [event for event in events if not event.partial][1:3]
    [call] = call_event.get_function_calls()
    assert call_event.custom_metadata == {"tool_steps": {call.id: "Saving your name"}}
    assert result_event.custom_metadata == {"tool_steps": {call.id: "Saved your name"}}
    stored_events = (await stored(owner, session.id)).events
    assert stored_events[2].custom_metadata == {"tool_steps": {call.id: "Saved your name"}}


async def test_instruction_is_templated_and_output_key_saves_the_reply(owner):
    session = await new_session(owner, **{"user:name": "Ada", "topic": "tea"})
    model = RecordingModel()
    runner = make_runner(
        model, instruction="Help {user:name} with {topic}.{mood?}", output_key="last_reply"
    )
    events = await turn(runner, owner, session.id, "hi")
    instruction = model.requests[0].system_instruction
    assert instruction.split("\n\n")[0] == "Help Ada with tea."
    assert '{"field": "name", "value": "Ada"}' in instruction, "the profile, always placed"
    assert (await stored(owner, session.id)).state["last_reply"] == events[-1].text()


async def test_missing_instruction_key_is_a_stored_error_and_keeps_the_message(owner):
    session = await new_session(owner)
    events = await turn(make_runner(instruction="Hello {user:name}"), owner, session.id, "hi")
    assert events[-1].error_code == "instruction_error"
    assert "user:name" in events[-1].error_message
    history = (await stored(owner, session.id)).events
    assert [event.text() for event in history if event.author == "user"] == ["hi"]


async def test_same_client_message_id_runs_one_turn(owner):
    session = await new_session(owner)
    runner = make_runner()
    await turn(runner, owner, session.id, "once", client_message_id="abc")
    with pytest.raises(DuplicateTurnError):
        await turn(runner, owner, session.id, "once", client_message_id="abc")
    assert await sync_to_async(EventRecord.objects.filter(author="user").count)() == 1


async def test_an_oversized_message_is_an_invalid_event_not_a_duplicate(owner, settings):
    settings.MAX_EVENT_BYTES = 200
    session = await new_session(owner)
    with pytest.raises(InvalidEventError, match="the limit is 200 bytes"):
        await turn(make_runner(), owner, session.id, "x" * 500, client_message_id="big")
    assert not await sync_to_async(EventRecord.objects.exists)()


async def test_transient_errors_are_retried_then_succeed(owner):
    session = await new_session(owner)
    model = ScriptedFailures(ModelError("busy", code="rate_limited", transient=True))
    events = await turn(make_runner(model), owner, session.id, "hi")
    assert model.calls == 2
    assert events[-1].text() == "recovered" and not events[-1].error_code


async def test_a_final_model_failure_is_a_stored_error_event_and_the_next_turn_works(owner):
    session = await new_session(owner)
    model = ScriptedFailures(
        *[ModelError("overloaded", code="model_unavailable", transient=True)] * 3,
        after_text="partial ",
    )
    events = await turn(make_runner(model), owner, session.id, "keep me")
    assert events[-1].error_code == "model_unavailable"
    assert model.calls == 1, "no retry once text was streamed"
    model.errors.clear()
    events = await turn(make_runner(model), owner, session.id, "again")
    assert events[-1].text() == "recovered"
    history = (await stored(owner, session.id)).events
    assert [event.text() for event in history if event.author == "user"] == ["keep me", "again"]


async def test_cancelling_stores_the_message_and_an_interrupted_reply(owner):
    session = await new_session(owner)
    runner = make_runner(RecordingModel(chunk_delay=0.05))
    seen = []

    async def consume():
        async for event in runner.run_async(
            user_id=str(owner.pk),
            session_id=session.id,
            new_message=types.Content(
                role="user", parts=[types.Part(text=" ".join(["word"] * 40))]
            ),
        ):
            seen.append(event)

    task = asyncio.create_task(consume())
    while sum(1 for event in seen if event.partial) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    history = (await stored(owner, session.id)).events
    assert history[0].author == "user"
    assert history[-1].interrupted is True
    assert history[-1].text() and history[-1].text() != "You said"


async def test_memories_are_preloaded_and_memory_tools_offered_only_when_allowed(owner):
    session = await new_session(owner)
    memory = StaticMemory()
    model = RecordingModel()
    events = await turn(
        make_runner(model, memory), owner, session.id, "remember that I cycle to work"
    )
    assert memory.created == ["I cycle to work"]
    assert (
        '{"text": "you like green tea", "confidence": 0.9}' in model.requests[0].system_instruction
    )
    assert {tool.name for tool in model.requests[0].tools} == {
        "set_state",
        "create_memory",
        "load_memory",
    }
    assert events[-1].custom_metadata["context"]["memories"][0]["text"] == "you like green tea"
    assert len(memory.completed) == 1

    denied = StaticMemory(use=False, create=False)
    model = RecordingModel()
    events = await turn(make_runner(model, denied), owner, session.id, "remember that I swim")
    assert denied.created == [] and denied.completed == []
    assert "green tea" not in model.requests[0].system_instruction
    assert {tool.name for tool in model.requests[0].tools} == {"set_state"}
    assert events[-1].custom_metadata["context"]["memories"] == []


async def test_temp_state_from_tools_is_seen_later_in_the_invocation_but_never_stored(owner):
    session = await new_session(owner)

    def scratch(args, context):
        context.state_delta["temp:scratch"] = "draft"
        return {"status": "ok"}

    class TwoSteps(RecordingModel):
        async def generate_stream(self, request):
            self.requests.append(request)
            if len(self.requests) == 1:
                yield LlmChunk(function_calls=[types.FunctionCall(name="scratch", args={})])
            else:
                yield LlmChunk(text=f"scratch is {request.state.get('temp:scratch')}")

    from agents_app.runtime import tools as tools_module

    tools_module.BUILTIN_TOOLS["scratch"] = Tool(types.FunctionDeclaration(name="scratch"), scratch)
    try:
        events = await turn(make_runner(TwoSteps(), tools=("scratch",)), owner, session.id, "go")
    finally:
        del tools_module.BUILTIN_TOOLS["scratch"]
    assert events[-1].text() == "scratch is draft"
    assert "temp:scratch" not in (await stored(owner, session.id)).state
    assert not await sync_to_async(SessionState.objects.filter(key__contains="scratch").exists)()


async def test_old_invocations_are_compacted_in_the_background_and_summarised_in_the_prompt(
    owner, settings
):
    compaction = {"keep_last_invocations": 2, "summarize_after_invocations": 2, "token_budget": 0}
    await app_compaction_set(CompactionConfig(**compaction))
    settings.BACKGROUND_TASKS = "inprocess"
    session = await new_session(owner)
    model = RecordingModel()
    runner = make_runner(model, compaction=CompactionConfig(**compaction))
    for text in ["first question", "second question", "third question", "fourth question"]:
        await turn(runner, owner, session.id, text)
    await sync_to_async(background_wait_idle)()

    compacted = [e for e in (await stored(owner, session.id)).events if e.actions.compaction]
    assert len(compacted) == 1
    summary = compacted[0].actions.compaction.compacted_content.parts[0].text
    assert "- User: first question" in summary and "- User: second question" in summary
    assert "third question" not in summary

    events = await turn(runner, owner, session.id, "fifth question")
    context = events[-1].custom_metadata["context"]
    assert "first question" in context["compaction_summary"]
    prompt_texts = [p.text for c in model.requests[-1].contents for p in c.parts if p.text]
    assert "first question" not in prompt_texts and "fourth question" in prompt_texts
    assert len((await stored(owner, session.id)).events) == 11


async def test_a_turn_reads_only_the_events_its_latest_compaction_does_not_cover(owner, settings):
    from agents_app.runtime.context import history_prepare
    from agents_app.runtime.turn_context import turn_session_load

    config = CompactionConfig(keep_last_invocations=2, summarize_after_invocations=2)
    await app_compaction_set(config)
    settings.BACKGROUND_TASKS = "inprocess"
    session = await new_session(owner)
    runner = make_runner(RecordingModel(), compaction=config)
    for text in ["first question", "second question", "third question", "fourth question"]:
        await turn(runner, owner, session.id, text)
    await sync_to_async(background_wait_idle)()

    loaded, compaction, _ = await turn_session_load(
        app_name=APP, user_id=str(owner.pk), session_id=session.id, max_events=400
    )
    everything = await stored(owner, session.id)
    covered_until = compaction.actions.compaction.end_timestamp
    uncovered = [event for event in everything.events if event.timestamp >= covered_until]
    assert [event.id for event in loaded.events] == [event.id for event in uncovered]
    assert len(loaded.events) < len(everything.events)
    assert loaded.state == everything.state
    assert history_prepare(
        events=loaded.events, agent_name="assistant", compaction=compaction, config=config
    ) == history_prepare(
        events=everything.events, agent_name="assistant", compaction=compaction, config=config
    )


@pytest.mark.django_db(transaction=True)
async def test_a_turn_streamed_to_a_socket_never_waits_for_the_database_thread(
    owner, requires_postgres
):
    # On PostgreSQL every read and write of a turn without memory preload goes from the event
    # loop: the turn's claim (its stored events read, the claim taken and given up), the
    # session load, both appends, the memory permissions and the trigger check, and the
    # socket's reads of what was stored. Here the one database thread is busy throughout.
    from agents_app.chat.turn_claims import TurnStart, turn_begin_async, turn_claim_release_async
    from agents_app.chat.turns import ChatTurn
    from agents_app.memory_provider import DjangoMemoryProvider

    session = await new_session(owner)
    key = await sync_to_async(session_key)(session)
    runner = make_runner(memory=DjangoMemoryProvider(), preload_memories=False)
    frames = []

    async def send(frame):
        frames.append(frame)

    chat_turn = ChatTurn(client_message_id="m-1", session_key=key, send=send)
    message = types.Content(role="user", parts=[types.Part(text="How far is the lake?")])

    async def stream():
        begin = await turn_begin_async(
            session_id=key, user_event_id=chat_turn.user_event_id, holder="test"
        )
        assert begin.start is TurnStart.NEW
        async for event in runner.run_async(
            user_id=str(owner.pk),
            session_id=session.id,
            new_message=message,
            client_message_id="m-1",
            claim=begin.claim,
        ):
            await chat_turn.event_forward(
                event, None if event.partial else runner.store.written_take(event)
            )
        await turn_claim_release_async(claim=begin.claim)

    # The app's settings, which the memory triggers take from what the process read in the
    # last few seconds (agents_app.app_policy.ASYNC_SETTINGS_SECONDS) and otherwise read
    # through the database thread, were read a moment ago, as in a process serving turns.
    from sessions_app.app_policy import app_policy_get

    await sync_to_async(app_policy_get().app_settings)(app_name=APP)
    release = threading.Event()
    busy = asyncio.ensure_future(sync_to_async(release.wait)())
    try:
        await asyncio.wait_for(stream(), timeout=10)
        assert not busy.done()
    finally:
        release.set()
        await busy

    stored_frames = [frame for frame in frames if frame["type"] == "event"]
    assert [frame["event"]["author"] for frame in stored_frames] == ["user", "assistant"]
    assert [frame["event"]["sequence"] for frame in stored_frames] == [1, 2]
    assert chat_turn.final is not None and chat_turn.final.turn_complete


# --- Issue 13: user: state is memory from the person's side -------------------------------------


async def test_a_temporary_chat_neither_reads_nor_writes_the_user_s_profile(owner):
    session = await new_session(owner, **{"user:name": "Dana"})
    temporary = StaticMemory(use=False, create=False)
    temporary.allowed = MemoryPermissions(use=False, create=False, temporary=True)

    events = await turn(make_runner(memory=temporary), owner, session.id, "My name is Zed")

    assert events[-1].text() == (
        "Not saved: this is a temporary chat, which keeps nothing about you."
    )
    assert (await stored(owner, session.id)).state == {"user:name": "Dana"}
    events = await turn(make_runner(memory=temporary), owner, session.id, "where do I live?")
    assert "Dana" not in events[-1].text()


async def test_with_memory_use_off_the_profile_is_not_read(owner):
    session = await new_session(owner, **{"user:name": "Dana"})
    model = RecordingModel()
    runner = make_runner(
        model, memory=StaticMemory(use=False, create=True), instruction="Hi {user:name?}."
    )

    await turn(runner, owner, session.id, "hello")

    assert model.requests[0].system_instruction.startswith("Hi .")
    assert "user:name" not in model.requests[0].state


@pytest.mark.parametrize(
    ("temporary", "reason"),
    [
        (True, "this is a temporary chat, which keeps nothing about you"),
        (False, "creating memories is turned off in your Settings"),
    ],
)
async def test_remember_with_creation_off_says_plainly_it_was_not_saved(owner, temporary, reason):
    session = await new_session(owner)
    memory = StaticMemory(use=False, create=False)
    memory.allowed = MemoryPermissions(use=False, create=False, temporary=temporary)

    events = await turn(
        make_runner(memory=memory), owner, session.id, "remember that I have a cat named Miso"
    )

    said = events[-1].text()
    assert said.startswith(f"I have not saved that: {reason}.")
    # With creation off, the reply also says what is and is not kept.
    assert ("never find it when they search your past conversations" in said) is not temporary
    assert memory.created == []


@pytest.mark.django_db(transaction=True)
async def test_a_turn_reads_with_its_writes_where_it_can(
    owner, requires_postgres, round_trips_recorded
):
    """On PostgreSQL a turn's memory permissions go in the round trip that reads its session,
    and what the memory triggers read of the turn in the one that stores its final event: each
    read where a write or another read goes anyway, never a round trip of its own."""
    from agents_app.memory_provider import DjangoMemoryProvider

    session = await new_session(owner)
    runner = make_runner(memory=DjangoMemoryProvider())
    await turn(runner, owner, session.id, "Warm up the process's caches")
    trips = round_trips_recorded()

    await turn(runner, owner, session.id, "How far is the lake?")

    def trips_with(*fragments):
        return [trip for trip in trips if all(fragment in trip for fragment in fragments)]

    assert len(trips_with("m.use_enabled")) == 1
    assert trips_with("m.use_enabled") == trips_with("m.use_enabled", "sessions_app_eventrecord")
    assert len(trips_with("memory_app_generationjob")) == 1
    [final] = trips_with("memory_app_generationjob")
    assert final.startswith("WITH claim AS (UPDATE")


async def test_a_model_calling_a_tool_at_every_step_answers_in_words_at_the_last(owner):
    """Issue 42: a small model calls a tool at every step it is offered one; the agent's last
    step is asked without tools, so the turn ends in a reply, not "stopped after N steps"."""
    session = await new_session(owner)

    class AlwaysCalls(RecordingModel):
        async def generate_stream(self, request):
            self.requests.append(request)
            if request.tools:
                yield LlmChunk(
                    function_calls=[
                        types.FunctionCall(name="set_state", args={"key": "k", "value": "v"})
                    ]
                )
            else:
                yield LlmChunk(text="Done.")

    model = AlwaysCalls()
    events = await turn(make_runner(model, max_steps=3), owner, session.id, "go")

    assert events[-1].turn_complete is True
    assert events[-1].error_code is None
    assert events[-1].text() == "Done."
    assert [bool(request.tools) for request in model.requests] == [True, True, False]
