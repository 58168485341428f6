"""Work kept for after a response: run when the handler's block ends, or at once without one."""

import logging

import pytest

from core.after_response import after_response, responses_sent_then_run


async def test_without_a_handler_the_work_runs_at_once():
    done = []

    async def work():
        done.append("work")

    await after_response(work())
    assert done == ["work"]


async def test_without_a_handler_a_failure_is_the_callers():
    async def failing():
        raise ValueError("no table")

    with pytest.raises(ValueError, match="no table"):
        await after_response(failing())


async def test_in_a_handlers_block_the_work_waits_for_the_block_to_end_and_keeps_its_order():
    done = []

    async def work(name):
        done.append(name)

    async with responses_sent_then_run():
        await after_response(work("audit"))
        await after_response(work("second"))
        done.append("response sent")
    assert done == ["response sent", "audit", "second"]


async def test_a_failure_after_the_response_is_logged_and_the_rest_still_runs(caplog):
    done = []

    async def failing():
        raise ValueError("no table")

    async def work():
        done.append("work")

    with caplog.at_level(logging.ERROR, logger="core.after_response"):
        async with responses_sent_then_run():
            await after_response(failing())
            await after_response(work())
    assert done == ["work"]
    assert "Work after a response failed" in caplog.text
    assert "no table" in caplog.text


async def test_blocks_do_not_share_their_work():
    done = []

    async def work(name):
        done.append(name)

    async with responses_sent_then_run():
        async with responses_sent_then_run():
            await after_response(work("inner"))
        assert done == ["inner"]
        await after_response(work("outer"))
        assert done == ["inner"]
    assert done == ["inner", "outer"]
