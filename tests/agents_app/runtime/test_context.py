from google.genai import types

from agents_app.runtime.agents import CompactionConfig
from agents_app.runtime.context import SUMMARY_PREFIX, history_prepare
from sessions_app.events import Event, EventActions, EventCompaction

AGENT = "assistant"


def said(author, text, invocation, timestamp):
    role = "user" if author == "user" else "model"
    return Event(
        author=author,
        invocation_id=invocation,
        timestamp=timestamp,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
    )


def conversation(turns: int) -> list[Event]:
    events = []
    for index in range(turns):
        events.append(said("user", f"q{index}", f"i{index}", index * 10.0))
        events.append(said(AGENT, f"a{index}", f"i{index}", index * 10.0 + 1))
    return events


def texts(prepared):
    return [part.text for content in prepared.contents for part in content.parts]


def prepare(events, compaction=None, **config):
    return history_prepare(
        events=events,
        agent_name=AGENT,
        compaction=compaction,
        config=CompactionConfig(**{"keep_last_invocations": 0, "token_budget": 0, **config}),
    )


def test_roles_follow_authors_and_other_agents_are_quoted():
    events = [
        said("user", "hi", "i1", 1),
        said(AGENT, "hello", "i1", 2),
        said("helper", "psst", "i1", 3),
    ]
    prepared = prepare(events)
    assert [content.role for content in prepared.contents] == ["user", "model", "user"]
    assert texts(prepared) == ["hi", "hello", "[helper] said: psst"]


def test_only_the_last_invocations_are_kept():
    prepared = prepare(conversation(5), keep_last_invocations=2)
    assert texts(prepared) == ["q3", "a3", "q4", "a4"]
    assert prepared.event_count == 4


def test_token_budget_drops_oldest_contents_but_never_the_last():
    events = conversation(3)
    events[-1] = said(AGENT, "x" * 400, "i2", 21)
    prepared = prepare(events, token_budget=50)
    assert texts(prepared) == ["x" * 400]


def test_errors_rewinds_and_partials_are_left_out():
    error = Event(author=AGENT, invocation_id="i0", error_code="model_error", error_message="boom")
    rewind = Event(author="user", actions=EventActions(rewind_before_invocation_id="i9"))
    partial = said(AGENT, "half", "i0", 5)
    partial.partial = True
    prepared = prepare([*conversation(1), error, rewind, partial])
    assert texts(prepared) == ["q0", "a0"]


def test_compaction_summary_replaces_the_events_it_covers():
    compaction = Event(
        author="system",
        timestamp=100.0,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=0.0,
                end_timestamp=11.0,
                compacted_content=types.Content(
                    role="model", parts=[types.Part(text="- User: q0")]
                ),
            )
        ),
    )
    prepared = prepare([*conversation(3), compaction], compaction=compaction)
    assert texts(prepared) == [SUMMARY_PREFIX + "- User: q0", "q2", "a2"]
    assert prepared.compaction_summary == "- User: q0"


def test_a_cut_never_starts_with_an_orphan_tool_response():
    call = Event(
        author=AGENT,
        invocation_id="i1",
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(name="f", args={}))]
        ),
    )
    response = Event(
        author=AGENT,
        invocation_id="i1",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(name="f", response={"r": "y" * 200})
                )
            ],
        ),
    )
    final = said(AGENT, "done", "i1", 3)
    prepared = prepare([said("user", "go", "i1", 0), call, response, final], token_budget=40)
    assert texts(prepared) == ["done"]
