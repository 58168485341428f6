"""The sweeper (``agents_app.chat.turn_sweep``): turns whose process died and whose client never
came back end as interrupted, a half-run tool call answered first; live and recently silent
turns are left alone, claims on ended or never-stored turns released."""

import pytest
from google.genai import types

from agents_app.chat.turn_claims import turn_begin
from agents_app.chat.turn_sweep import turns_sweep
from agents_app.models import TurnClaim
from agents_app.runtime.turns import SERVER_STOPPED, TOOL_CALL_INTERRUPTED
from sessions_app import services
from sessions_app.events import Event
from sessions_app.models import EventRecord
from tests.agents_app.chat.turns import agent_event, chat_message, claim_age, turn_events
from tests.factories import session_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("turn_leases")]


def test_the_sweeper_ends_a_turn_nobody_came_back_for(session):
    chat_message(session)
    claim = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a").claim
    claim_age(claim, 91)

    report = turns_sweep()

    assert report.interrupted == ["msg-m1"]
    assert turn_events(session) == [
        ("msg-m1", None, None, ""),
        ("msg-m1.1", True, True, SERVER_STOPPED),
    ]
    assert TurnClaim.objects.count() == 0
    assert turns_sweep().interrupted == [], "a second sweep finds nothing"
    assert len(turn_events(session)) == 2


def test_the_sweeper_answers_a_half_run_tool_call_before_ending_the_turn(session):
    user_event = chat_message(session)
    claim = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a").claim
    call = types.FunctionCall(id="c1", name="set_state", args={"key": "k", "value": "v"})
    agent_event(
        session,
        user_event,
        1,
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )
    claim_age(claim, 91)

    turns_sweep()

    records = list(EventRecord.objects.filter(session__session_id=session.id).order_by("sequence"))
    assert [record.event_id for record in records] == [
        "msg-m1",
        "msg-m1.1",
        "msg-m1.2",
        "msg-m1.3",
    ]
    response = records[2].content["parts"][0]["function_response"]
    assert response["id"] == "c1"
    assert response["response"]["message"] == TOOL_CALL_INTERRUPTED
    assert records[3].error_code == SERVER_STOPPED


def test_the_sweeper_leaves_live_and_recently_silent_turns_and_clears_stale_claims(session):
    live = chat_message(session, "live")
    turn_begin(session_id=session_key(session), user_event_id=live.id, holder="a")
    recent = chat_message(session, "recent")
    claim_age(
        turn_begin(session_id=session_key(session), user_event_id=recent.id, holder="a").claim, 20
    )
    ended = chat_message(session, "ended")
    ended_claim = turn_begin(
        session_id=session_key(session), user_event_id=ended.id, holder="a"
    ).claim
    agent_event(session, ended, 1, turn_complete=True)
    claim_age(ended_claim, 20)
    never_stored = turn_begin(
        session_id=session_key(session), user_event_id="msg-lost", holder="a"
    ).claim
    claim_age(never_stored, 20)

    report = turns_sweep()

    assert (report.released, report.interrupted, report.waiting) == (2, [], 1)
    assert sorted(TurnClaim.objects.values_list("user_event_id", flat=True)) == [
        "msg-live",
        "msg-recent",
    ]
    assert not any(error for *_, error in turn_events(session))


def test_a_turn_whose_next_place_holds_another_invocations_event_is_given_up(session):
    """The repro of issue 27: an event of another invocation stored as ``msg-m1.1`` once kept
    the sweeper taking the claim over and failing at every sweep, for ever."""
    chat_message(session)
    services.event_append(
        session=session,
        event=Event(id="msg-m1.1", invocation_id="e-elsewhere", author="user"),
    )
    claim = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a").claim
    claim_age(claim, 91)

    report = turns_sweep()

    assert (report.blocked, report.interrupted) == (["msg-m1"], [])
    assert TurnClaim.objects.count() == 0
    second = turns_sweep()
    assert (second.blocked, second.interrupted, second.released) == ([], [], 0)
