"""Every turn the runner runs is claimed (``agents_app.chat.turn_claims``), a turn whose caller
named no client message id included: the claim is kept alive while the turn runs and given up after
it, and a turn whose process died is ended by the sweeper."""

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.chat.turn_claims import turn_claim_take
from agents_app.chat.turn_sweep import turns_sweep
from agents_app.models import TurnClaim
from agents_app.runtime.runner import DuplicateTurnError
from agents_app.runtime.turn_store import TurnBlockedError, TurnTakenOverError
from agents_app.runtime.turns import SERVER_STOPPED
from sessions_app import services
from sessions_app.events import Event
from sessions_app.models import EventRecord
from tests.agents_app.runtime.test_runner import RecordingModel, make_runner, new_session
from tests.factories import UserFactory, session_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(transactional_db):
    return UserFactory()


def _message(text):
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _claims(session_id):
    return await sync_to_async(list)(
        TurnClaim.objects.filter(session__session_id=session_id).values(
            "user_event_id", "holder", "fence", "renewed_at"
        )
    )


async def _records(session_id):
    return await sync_to_async(list)(
        EventRecord.objects.filter(session__session_id=session_id).order_by("sequence")
    )


async def test_a_turn_without_a_client_message_id_is_claimed_renewed_and_released(owner, settings):
    settings.TURN_LEASE_SECONDS = 0.3  # renewed every 0.1 s
    session = await new_session(owner)
    runner = make_runner(model=RecordingModel(chunk_delay=0.15))
    events = runner.run_async(
        user_id=str(owner.pk), session_id=session.id, new_message=_message("tell me a story")
    )

    user_event = await anext(events)
    (claim,) = await _claims(session.id)
    assert user_event.id.startswith("msg-srv-")
    assert user_event.custom_metadata == {"client_message_id": user_event.id.removeprefix("msg-")}
    assert claim["user_event_id"] == user_event.id
    assert claim["holder"].endswith(":runner")
    await asyncio.sleep(0.35)
    (renewed,) = await _claims(session.id)
    assert renewed["renewed_at"] > claim["renewed_at"]
    assert renewed["fence"] == claim["fence"]

    rest = [event async for event in events]
    assert rest[-1].turn_complete and not rest[-1].interrupted
    assert await _claims(session.id) == []
    assert [record.event_id for record in await _records(session.id)] == [
        user_event.id,
        f"{user_event.id}.1",
    ]


async def test_a_turn_without_a_client_message_id_whose_process_died_is_ended_by_the_sweeper(
    owner,
):
    """The runner stops (as its process would on SIGKILL) after storing the user's message: the
    sweeper finds its claim silent and stores the reply as interrupted; should the runner wake
    after all, it stores nothing beside that."""
    session = await new_session(owner)
    runner = make_runner(model=RecordingModel(chunk_delay=0.05))
    events = runner.run_async(
        user_id=str(owner.pk), session_id=session.id, new_message=_message("are you there?")
    )
    user_event = await anext(events)

    report = await sync_to_async(turns_sweep)(now=time.time() + 3600)

    assert report.interrupted == [user_event.id]
    records = await _records(session.id)
    assert [record.event_id for record in records] == [user_event.id, f"{user_event.id}.1"]
    final = records[-1]
    assert final.turn_complete and final.interrupted
    assert final.error_code == SERVER_STOPPED
    with pytest.raises(TurnTakenOverError):
        async for _event in events:
            pass
    assert len(await _records(session.id)) == 2
    assert await _claims(session.id) == []


async def test_a_turn_claimed_elsewhere_is_not_run(owner):
    session = await new_session(owner)
    held = await sync_to_async(turn_claim_take)(
        session_id=await sync_to_async(session_key)(session),
        user_event_id="msg-twice",
        holder="host:1:other-socket",
    )

    with pytest.raises(DuplicateTurnError):
        async for _event in make_runner().run_async(
            user_id=str(owner.pk),
            session_id=session.id,
            new_message=_message("only once"),
            client_message_id="twice",
        ):
            pass

    assert await _records(session.id) == []
    (claim,) = await _claims(session.id)
    assert (claim["holder"], claim["fence"]) == ("host:1:other-socket", held.fence)


async def test_a_turn_whose_next_place_holds_another_invocations_event_gives_up_its_claim(owner):
    """No process can ever store the reply of this turn: the runner raises TurnBlockedError and
    releases its claim, so neither a re-send nor the sweeper takes the turn up again."""
    session = await new_session(owner)
    planted = Event(id="msg-p1.1", invocation_id="e-elsewhere", author="user")
    await sync_to_async(services.event_append)(session=session, event=planted)
    runner = make_runner()

    with pytest.raises(TurnBlockedError):
        async for _event in runner.run_async(
            user_id=str(owner.pk),
            session_id=session.id,
            new_message=_message("hello"),
            client_message_id="p1",
        ):
            pass

    assert await _claims(session.id) == []
    report = await sync_to_async(turns_sweep)(now=time.time() + 3600)
    assert (report.interrupted, report.blocked) == ([], [])
