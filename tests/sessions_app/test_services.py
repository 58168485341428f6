import math
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from google.genai import types

from core.async_database import StoreRead
from sessions_app import selectors, services
from sessions_app.errors import (
    InvalidEventError,
    InvalidStateError,
    InvocationNotFoundError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    SessionStoreError,
)
from sessions_app.events import Event, EventActions
from sessions_app.models import AppState, EventRecord, SessionRecord, SessionState, UserState
from sessions_app.selectors import InvalidPageTokenError
from sessions_app.services import GetSessionConfig, SessionService
from tests.factories import UserFactory, session_key

APP = "demo"


def text_event(text: str, *, author: str = "user", invocation_id: str = "inv", **delta) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta),
    )


def create(user, **kwargs):
    return services.session_create(
        app_name=kwargs.pop("app_name", APP), user_id=str(user.pk), **kwargs
    )


def get(user, session_id, app_name=APP, **config):
    return selectors.session_get(
        app_name=app_name,
        user_id=str(user.pk),
        session_id=session_id,
        config=GetSessionConfig(**config) if config else None,
    )


@pytest.mark.django_db(transaction=True)
async def test_adk_seed_example_reads_back_as_documented():

    user = await sync_to_async(UserFactory)()
    service = SessionService()
    session = await service.create_session(
        app_name=APP, user_id=str(user.pk), state={"user:login_count": 0, "task_status": "idle"}
    )
    login_ts = time.time()
    event = Event(
        invocation_id="invocation_login_update",
        author="system",
        actions=EventActions(
            state_delta={
                "task_status": "active",
                "user:login_count": 1,
                "user:last_login_ts": login_ts,
                "temp:validation_needed": True,
            }
        ),
    )
    await service.append_event(session, event)

    assert session.state["temp:validation_needed"] is True
    stored = await service.get_session(app_name=APP, user_id=str(user.pk), session_id=session.id)
    assert stored.state == {
        "user:login_count": 1,
        "task_status": "active",
        "user:last_login_ts": login_ts,
    }
    assert stored.events[0].actions.state_delta == {
        "task_status": "active",
        "user:login_count": 1,
        "user:last_login_ts": login_ts,
    }

    other = await service.create_session(app_name=APP, user_id=str(user.pk))
    assert other.state == {"user:login_count": 1, "user:last_login_ts": login_ts}
    elsewhere = await service.create_session(app_name="other-app", user_id=str(user.pk))
    assert elsewhere.state == {}
    page = await service.list_sessions(app_name=APP, user_id=str(user.pk))
    assert {s.id for s in page.sessions} == {session.id, other.id}
    await service.delete_session(app_name=APP, user_id=str(user.pk), session_id=other.id)
    assert (
        await service.get_session(app_name=APP, user_id=str(user.pk), session_id=other.id) is None
    )


def test_user_keys_are_private_to_the_user_and_app_keys_shared_by_the_app(user, other_user):
    session = create(user)
    services.event_append(
        session=session, event=text_event("hi", **{"user:name": "Ada", "app:motd": "hello"})
    )

    assert create(user).state == {"user:name": "Ada", "app:motd": "hello"}
    assert create(other_user).state == {"app:motd": "hello"}
    assert create(other_user, app_name="other").state == {}


def test_temp_keys_are_visible_in_the_invocation_and_never_stored(user):
    session = create(user)
    services.event_append(session=session, event=text_event("a", **{"temp:scratch": [1, 2]}))
    assert session.state["temp:scratch"] == [1, 2]

    record = EventRecord.objects.get(session__session_id=session.id)
    assert record.actions.get("state_delta", {}) == {}
    assert not SessionState.objects.filter(key__contains="scratch").exists()
    assert not UserState.objects.exists() and not AppState.objects.exists()
    assert "temp:scratch" not in get(user, session.id).state


def test_temp_keys_given_at_creation_are_dropped(user):
    session = create(user, state={"temp:x": 1, "kept": 2})
    assert session.state == {"kept": 2}
    assert get(user, session.id).state == {"kept": 2}


def test_partial_events_are_returned_but_not_stored(user):
    session = create(user)
    partial = text_event("str", author="agent")
    partial.partial = True
    assert services.event_append(session=session, event=partial) is partial
    assert not EventRecord.objects.exists()
    assert session.events == []


def test_events_get_contiguous_sequence_numbers_and_keep_their_content(user):
    session = create(user)
    for index in range(5):
        services.event_append(session=session, event=text_event(f"message {index}"))
    assert list(
        EventRecord.objects.filter(session__session_id=session.id)
        .order_by("sequence")
        .values_list("sequence", flat=True)
    ) == [1, 2, 3, 4, 5]
    stored = get(user, session.id)
    assert [event.text() for event in stored.events] == [f"message {i}" for i in range(5)]
    assert [event.id for event in stored.events] == [event.id for event in session.events]


def test_function_calls_and_metadata_survive_storage(user):
    session = create(user)
    call = Event(
        invocation_id="inv",
        author="agent",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="let me check"),
                types.Part(
                    function_call=types.FunctionCall(id="c1", name="lookup", args={"q": "x"})
                ),
            ],
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=7),
        custom_metadata={"k": [1, "two"]},
        branch="root.helper",
        error_code=None,
    )
    services.event_append(session=session, event=call)
    [stored] = get(user, session.id).events
    assert stored.get_function_calls()[0].name == "lookup"
    assert stored.get_function_calls()[0].args == {"q": "x"}
    assert stored.usage_metadata.prompt_token_count == 7
    assert stored.custom_metadata == {"k": [1, "two"]}
    assert stored.branch == "root.helper"
    assert stored.model_dump(mode="json", exclude_none=True) == call.model_dump(
        mode="json", exclude_none=True
    )


def test_get_session_config_limits_events(user):
    session = create(user)
    for index in range(10):
        event = text_event(f"m{index}")
        event.timestamp = 1000.0 + index
        services.event_append(session=session, event=event)

    assert [e.text() for e in get(user, session.id, num_recent_events=3).events] == [
        "m7",
        "m8",
        "m9",
    ]
    assert [e.text() for e in get(user, session.id, after_timestamp=1008.0).events] == ["m8", "m9"]
    assert get(user, session.id, num_recent_events=0).events == []
    assert len(get(user, session.id).events) == 10


def test_get_session_of_missing_or_foreign_session_is_none(user, other_user):
    session = create(user)
    assert get(other_user, session.id) is None
    assert get(user, session.id, app_name="other") is None
    assert get(user, "no-such-session") is None
    assert (
        selectors.session_get(app_name=APP, user_id="not-a-number", session_id=session.id) is None
    )


def test_list_sessions_pages_newest_first_without_gaps_or_repeats(user, other_user):
    created = [create(user).id for _ in range(7)]
    create(other_user)
    seen, token = [], None
    while True:
        page = selectors.session_list(
            app_name=APP, user_id=str(user.pk), page_size=3, page_token=token
        )
        seen.extend(page.sessions)
        token = page.next_page_token
        if not token:
            break
    assert sorted(s.id for s in seen) == sorted(created)
    times = [s.last_update_time for s in seen]
    assert times == sorted(times, reverse=True)
    assert all(s.events == [] for s in seen)


def test_list_sessions_rejects_forged_page_tokens(user):
    with pytest.raises(InvalidPageTokenError):
        selectors.session_list(app_name=APP, user_id=str(user.pk), page_token="%%%garbage")


def test_appending_moves_the_session_to_the_top_of_the_list(user):
    first = create(user)
    create(user)
    services.event_append(session=first, event=text_event("again"))
    page = selectors.session_list(app_name=APP, user_id=str(user.pk))
    assert page.sessions[0].id == first.id


def test_delete_session_removes_events_and_session_state_but_not_user_state(user, other_user):
    session = create(user, state={"s": 1})
    services.event_append(session=session, event=text_event("x", **{"user:u": 1}))
    assert (
        services.session_delete(app_name=APP, user_id=str(other_user.pk), session_id=session.id)
        is False
    )
    assert (
        services.session_delete(app_name=APP, user_id=str(user.pk), session_id=session.id) is True
    )
    assert not EventRecord.objects.exists() and not SessionState.objects.exists()
    assert UserState.objects.filter(user=user, key="u").exists()


@pytest.mark.parametrize(
    "state, message",
    [
        ({"x": {1, 2}}, "not JSON-serialisable"),
        ({"x": math.nan}, "not JSON-serialisable"),
        ({"x": object()}, "not JSON-serialisable"),
        ({1: "x"}, "must be strings"),
        ({"": 1}, "must not be empty"),
        ({"user:": 1}, "no name"),
        ({"User:name": 1}, "wrong case"),
        ({"APP:x": 1}, "wrong case"),
        ({"k" * 300: 1}, "longer than"),
        (["not", "a", "dict"], "JSON object"),
    ],
)
def test_create_refuses_bad_state_and_writes_nothing(user, state, message):
    with pytest.raises(InvalidStateError, match=message):
        create(user, state=state)
    assert not SessionRecord.objects.exists()


def test_ids_are_unique_within_an_app_and_a_user_only(user, other_user):
    theirs = create(user, session_id="chosen-id", state={"owner": "first"})
    mine = create(other_user, session_id="chosen-id", state={"owner": "second"})
    elsewhere = create(user, app_name="travel", session_id="chosen-id", state={"owner": "third"})

    assert theirs.id == mine.id == elsewhere.id == "chosen-id"
    for session, owner in ((theirs, "first"), (mine, "second"), (elsewhere, "third")):
        read = selectors.session_get(
            app_name=session.app_name, user_id=session.user_id, session_id="chosen-id"
        )
        assert read.state == {"owner": owner}
    assert SessionRecord.objects.filter(session_id="chosen-id").count() == 3
    with pytest.raises(SessionAlreadyExistsError, match="travel"):
        create(user, app_name="travel", session_id="chosen-id")
    assert services.session_delete(app_name=APP, user_id=str(user.pk), session_id="chosen-id")
    assert selectors.session_get(app_name=APP, user_id=mine.user_id, session_id="chosen-id")


def test_create_refuses_oversized_state_values(user, settings):
    settings.MAX_STATE_VALUE_BYTES = 100
    with pytest.raises(InvalidStateError, match="the limit is 100 bytes"):
        create(user, state={"big": "x" * 200})


def test_create_refuses_duplicate_ids_malformed_ids_and_unknown_users(user, other_user):
    create(user, session_id="chosen-id")
    with pytest.raises(SessionAlreadyExistsError):
        create(user, session_id="chosen-id")
    with pytest.raises(SessionStoreError, match="session_id"):
        create(user, session_id="s" * 129)
    with pytest.raises(SessionStoreError, match="app_name"):
        create(user, app_name="")
    with pytest.raises(SessionStoreError, match="does not name a user"):
        services.session_create(app_name=APP, user_id="999999")
    assert SessionRecord.objects.count() == 1


@pytest.mark.parametrize(
    "delta",
    [{"ok": 1, "bad": {1}}, {"ok": 1, "Temp:x": 1}, {"ok": 1, "n": math.inf}],
)
def test_append_with_bad_delta_writes_nothing(user, delta):
    session = create(user)
    event = text_event("x", **delta)
    with pytest.raises(InvalidStateError):
        services.event_append(session=session, event=event)
    assert not EventRecord.objects.exists()
    assert SessionRecord.objects.get(session_id=session.id).last_sequence == 0
    assert session.state == {} and session.events == []
    assert event.actions.state_delta == delta


def test_append_refuses_oversized_events(user, settings):
    settings.MAX_EVENT_BYTES = 1000
    session = create(user)
    with pytest.raises(InvalidEventError, match="the limit is 1,000 bytes"):
        services.event_append(session=session, event=text_event("x" * 2000))
    assert not EventRecord.objects.exists()


def test_append_refuses_a_repeated_event_id_and_keeps_the_sequence(user):
    session = create(user)
    event = text_event("once", counter=1)
    services.event_append(session=session, event=event)
    again = text_event("twice", counter=2)
    again.id = event.id
    with pytest.raises(InvalidEventError, match="already stored"):
        services.event_append(session=session, event=again)
    assert SessionRecord.objects.get(session_id=session.id).last_sequence == 1
    assert get(user, session.id).state == {"counter": 1}


def test_append_to_a_deleted_session_is_session_not_found(user):
    session = create(user)
    services.session_delete(app_name=APP, user_id=str(user.pk), session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        services.event_append(session=session, event=text_event("x"))


def test_append_is_refused_for_a_session_object_naming_another_user(user, other_user):
    session = create(user)
    forged = session.model_copy(update={"user_id": str(other_user.pk)})
    with pytest.raises(SessionNotFoundError):
        services.event_append(session=forged, event=text_event("x"))
    assert not EventRecord.objects.exists()


def rewind(user, session, invocation_id):
    return services.session_rewind(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        rewind_before_invocation_id=invocation_id,
    )


def test_rewind_restores_session_state_hides_later_events_and_records_itself(user):
    session = create(user, state={"mood": "calm"})
    services.event_append(session=session, event=text_event("one", invocation_id="i1", step=1))
    services.event_append(
        session=session,
        event=text_event(
            "two", invocation_id="i2", step=2, mood="busy", added=True, **{"user:seen": 2}
        ),
    )
    services.event_append(session=session, event=text_event("three", invocation_id="i3", step=3))

    rewind_event = rewind(user, session, "i2")

    after = get(user, session.id)
    assert after.state == {"mood": "calm", "step": 1, "user:seen": 2}
    assert [e.text() for e in after.events if e.content] == ["one"]
    assert after.events[-1].actions.rewind_before_invocation_id == "i2"
    assert rewind_event.actions.state_delta == {"step": 1, "mood": "calm", "added": None}
    everything = get(user, session.id, include_rewound=True)
    assert [e.text() for e in everything.events if e.content] == ["one", "two", "three"]
    assert EventRecord.objects.filter(session__session_id=session.id, rewound=True).count() == 2

    services.event_append(session=after, event=text_event("four", invocation_id="i4", step=4))
    assert get(user, session.id).state["step"] == 4


def test_rewind_again_to_an_earlier_invocation_replays_earlier_rewinds(user):
    session = create(user)
    services.event_append(session=session, event=text_event("one", invocation_id="i1", a=1))
    services.event_append(session=session, event=text_event("two", invocation_id="i2", b=2))
    rewind(user, session, "i2")
    fresh = get(user, session.id)
    services.event_append(session=fresh, event=text_event("three", invocation_id="i3", c=3))
    rewind(user, session, "i3")
    assert get(user, session.id).state == {"a": 1}
    rewind(user, session, "i1")
    assert get(user, session.id).state == {}
    assert [e.text() for e in get(user, session.id).events if e.content] == []


def test_rewind_to_an_unknown_invocation_changes_nothing(user):
    session = create(user)
    services.event_append(session=session, event=text_event("one", invocation_id="i1", a=1))
    services.event_append(session=session, event=text_event("two", invocation_id="i2", a=2))
    rewind(user, session, "i2")
    before = SessionRecord.objects.get(session_id=session.id).last_sequence
    with pytest.raises(InvocationNotFoundError):
        rewind(user, session, "nope")
    assert SessionRecord.objects.get(session_id=session.id).last_sequence == before
    assert get(user, session.id).state == {"a": 1}


def three_turns(user):
    session = create(user)
    for number in (1, 2, 3):
        services.event_append(
            session=session,
            event=text_event(f"say {number}", invocation_id=f"i{number}", **{f"k{number}": number}),
        )
        services.event_append(
            session=session,
            event=text_event(
                f"reply {number}", author="agent", invocation_id=f"i{number}", step=number
            ),
        )
    return session


def history(user, session):
    return [e.text() for e in get(user, session.id).events if e.content]


def test_rewind_to_a_turn_an_earlier_rewind_took_out_brings_that_point_back(user):
    session = three_turns(user)
    rewind(user, session, "i3")
    rewind(user, session, "i2")
    assert get(user, session.id).state == {"k1": 1, "step": 1}
    assert history(user, session) == ["say 1", "reply 1"]

    restoring = rewind(user, session, "i3")

    assert get(user, session.id).state == {"k1": 1, "k2": 2, "step": 2}
    assert restoring.actions.state_delta == {"k2": 2, "step": 2}
    assert history(user, session) == ["say 1", "reply 1", "say 2", "reply 2"]
    marks = list(
        EventRecord.objects.filter(session__session_id=session.id)
        .order_by("sequence")
        .values_list("invocation_id", "rewound")
    )
    # Every event stays stored; the last rewind takes out turn 3 and both earlier rewinds.
    assert [rewound for _, rewound in marks] == [False] * 4 + [True] * 4 + [False]
    everything = get(user, session.id, include_rewound=True).events
    assert len(everything) == 9
    assert [e.actions.rewind_before_invocation_id for e in everything[-3:]] == ["i3", "i2", "i3"]


def test_a_new_turn_after_a_rewind_can_itself_be_rewound_and_brought_back(user):
    session = three_turns(user)
    rewind(user, session, "i2")
    fresh = get(user, session.id)
    services.event_append(session=fresh, event=text_event("say 4", invocation_id="i4", k4=4))
    rewind(user, session, "i4")
    assert history(user, session) == ["say 1", "reply 1"]
    assert get(user, session.id).state == {"k1": 1, "step": 1}

    rewind(user, session, "i3")

    assert history(user, session) == ["say 1", "reply 1", "say 2", "reply 2"]
    assert get(user, session.id).state == {"k1": 1, "k2": 2, "step": 2}


def test_rewind_is_atomic_when_recording_the_rewind_fails(user, monkeypatch):
    session = create(user)
    services.event_append(session=session, event=text_event("one", invocation_id="i1", a=1))
    services.event_append(session=session, event=text_event("two", invocation_id="i2", a=2))

    def fail(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(EventRecord.objects, "create", fail)
    with pytest.raises(RuntimeError):
        rewind(user, session, "i2")
    monkeypatch.undo()
    assert not EventRecord.objects.filter(rewound=True).exists()
    assert get(user, session.id).state == {"a": 2}
    assert SessionRecord.objects.get(session_id=session.id).last_sequence == 2


def test_rewind_of_another_users_session_is_not_found(user, other_user):
    session = create(user)
    services.event_append(session=session, event=text_event("one", invocation_id="i1"))
    with pytest.raises(SessionNotFoundError):
        rewind(other_user, session, "i1")


def _run_writers(count: int, target) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(index: int) -> None:
        try:
            barrier.wait()
            target(index)
        except BaseException as error:  # collected and asserted on by the test
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_writers_lose_no_event_and_no_state_key(requires_postgres):
    user = UserFactory()
    session_id = create(user).id
    writers, per_writer = 16, 100

    def write(index: int) -> None:
        session = get(user, session_id, num_recent_events=0)
        for number in range(per_writer):
            services.event_append(
                session=session,
                event=text_event(
                    f"w{index} #{number}",
                    **{
                        f"w{index}_{number}": number,
                        f"w{index}_last": number,
                        f"user:w{index}": number,
                    },
                ),
            )

    assert _run_writers(writers, write) == []

    sequences = list(
        EventRecord.objects.filter(session__session_id=session_id)
        .order_by("sequence")
        .values_list("sequence", flat=True)
    )
    assert sequences == list(range(1, writers * per_writer + 1))
    state = get(user, session_id, num_recent_events=0).state
    for index in range(writers):
        assert all(state[f"w{index}_{number}"] == number for number in range(per_writer))
        assert state[f"w{index}_last"] == per_writer - 1
        assert state[f"user:w{index}"] == per_writer - 1
    texts = [e.text() for e in get(user, session_id).events]
    for index in range(writers):
        mine = [t for t in texts if t.startswith(f"w{index} ")]
        assert mine == [f"w{index} #{number}" for number in range(per_writer)]


@pytest.mark.django_db(transaction=True)
def test_sessions_of_one_user_writing_shared_user_keys_do_not_deadlock(requires_postgres):
    user = UserFactory()
    session_ids = [create(user).id for _ in range(4)]

    def write(index: int) -> None:
        session = get(user, session_ids[index], num_recent_events=0)
        keys = [f"user:k{n}" for n in range(10)]
        if index % 2:
            keys.reverse()
        for round_number in range(20):
            delta = {key: round_number for key in keys}
            services.event_append(session=session, event=text_event("x", **delta))

    assert _run_writers(4, write) == []
    assert UserState.objects.filter(user=user).count() == 10
    assert EventRecord.objects.count() == 80


def test_rename_sets_the_title_without_reordering_sessions(user, other_user):
    first = create(user)
    second = create(user)
    assert services.session_rename(user_pk=user.pk, session_id=first.id, title="  Trip   plans ")
    assert SessionRecord.objects.get(session_id=first.id).title == "Trip plans"
    assert selectors.session_list(app_name=APP, user_id=str(user.pk)).sessions[0].id == second.id
    assert not services.session_rename(user_pk=other_user.pk, session_id=first.id, title="x")
    with pytest.raises(SessionStoreError, match="200"):
        services.session_rename(user_pk=user.pk, session_id=first.id, title="x" * 201)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"author": "bad\x00author"}, "NUL"),
        ({"branch": "b" * 513}, "512"),
        ({"error_code": "e" * 129}, "128"),
        ({"timestamp": math.inf}, "finite"),
        ({"timestamp": 1e300}, "within years 1-9999"),
        ({"content": types.Content(role="user", parts=[types.Part(text="nul \x00 here")])}, "NUL"),
    ],
)
def test_append_refuses_values_the_database_cannot_store(user, change, message):
    session = create(user)
    event = text_event("x").model_copy(update=change)
    with pytest.raises(InvalidEventError, match=message):
        services.event_append(session=session, event=event)
    assert not EventRecord.objects.exists()


def test_nul_characters_in_state_and_ids_are_refused(user):
    with pytest.raises(InvalidStateError, match="NUL"):
        create(user, state={"k": "a\x00b"})
    with pytest.raises(InvalidStateError, match="NUL"):
        create(user, state={"k\x00": 1})
    with pytest.raises(SessionStoreError, match="session_id"):
        create(user, session_id="abc\x00")
    assert not SessionRecord.objects.exists()


def test_event_content_reads_back_alike_through_get_session_and_the_orm(user):
    session = create(user)
    content = types.Content(
        role="model",
        parts=[
            types.Part(text='quotes " and \\ backslashes, \u00e9 and \U0001f600 and 2**70'),
            types.Part(function_call=types.FunctionCall(name="f", args={"n": 2**70, "x": 0.1})),
        ],
    )
    services.event_append(session=session, event=Event(author="agent", content=content))
    services.event_append(session=session, event=Event(author="agent"))

    stored_content, empty_content = EventRecord.objects.order_by("sequence").values_list(
        "content", flat=True
    )
    assert stored_content == content.model_dump(mode="json", exclude_none=True)
    assert empty_content is None
    assert stored_content["parts"][1]["function_call"]["args"]["n"] == 2**70
    read = get(user, session.id).events
    assert read[0].content == content and read[1].content is None


@pytest.mark.django_db(transaction=True)
async def test_an_append_answers_the_event_as_a_read_gives_it_back():
    user = await sync_to_async(UserFactory)()
    service = SessionService()
    session = await service.create_session(app_name=APP, user_id=str(user.pk))
    await service.append_event(session, text_event("first"))

    answered = await service.append_event_stored(
        session, text_event("second", author="assistant", step=2, **{"temp:scratch": True})
    )

    read = await sync_to_async(selectors.stored_event_get)(
        session_key=await sync_to_async(session_key)(session), event_id=answered.event.id
    )
    assert (answered.sequence, answered.rewound) == (read.sequence, read.rewound) == (2, False)
    assert answered.event.model_dump(mode="json", exclude_none=True) == read.event.model_dump(
        mode="json", exclude_none=True
    )
    assert "temp:scratch" not in answered.event.actions.state_delta


@pytest.mark.django_db(transaction=True)
async def test_a_read_made_with_an_append_sees_the_event_stored():
    """What follows a turn's last write (its memory trigger's read) goes with it and reads the
    session as the write left it."""
    user = await sync_to_async(UserFactory)()
    service = SessionService()
    session = await service.create_session(app_name=APP, user_id=str(user.pk))
    await service.append_event(session, text_event("first"))
    key = await sync_to_async(session_key)(session)
    count = StoreRead(
        [("SELECT count(*) FROM sessions_app_eventrecord WHERE session_id = %s", [key])],
        lambda results: results[0][0][0],
    )

    answered, events = await service.append_event_stored_then(
        session, text_event("second", author="assistant", step=2), then=count
    )

    assert (answered.sequence, events) == (2, 2)
    assert [event.text() for event in session.events] == ["first", "second"]
