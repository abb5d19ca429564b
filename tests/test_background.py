"""The one supervisor of background loops: backoff, logging once per distinct failure, surviving bugs."""

from __future__ import annotations

import logging

import anyio
import pytest

from ollama_mcp.background import Wakeup, at_once, supervise
from ollama_mcp.errors import DatabaseBusyError

pytestmark = pytest.mark.anyio


async def test_a_step_returning_none_ends_the_loop_and_a_number_is_the_next_wait() -> None:
    calls: list[float] = []

    async def step() -> float | None:
        calls.append(anyio.current_time())
        return None if len(calls) == 3 else 0.05

    with anyio.fail_after(5):
        await supervise("test loop", step)
    assert len(calls) == 3
    assert calls[2] - calls[1] >= 0.05


async def test_our_errors_are_logged_once_per_message_and_retried_with_growing_delays(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[float] = []

    async def step() -> float | None:
        calls.append(anyio.current_time())
        if len(calls) <= 3:
            raise DatabaseBusyError("The database stayed locked; try again.")
        return None

    caplog.set_level(logging.DEBUG, logger="ollama_mcp.background")
    with anyio.fail_after(10):
        await supervise("test loop", step, max_delay=1.5)
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    # 1 s, then doubling, capped at max_delay: the bounds and the order, not the exact figures,
    # which a loaded machine stretches ([1.1, 1.5, 1.5] was seen).
    assert 1.0 <= gaps[0] < 1.5 <= gaps[1] and 1.5 <= gaps[2] and max(gaps[1:3]) < 2.0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["test loop postponed: The database stayed locked; try again."]


async def test_a_bug_in_a_step_is_logged_with_its_stack_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def step() -> float | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ZeroDivisionError("a bug")
        return None

    with anyio.fail_after(5):
        await supervise("test loop", step, max_delay=0.05)
    assert calls == 2
    failure = next(r for r in caplog.records if r.getMessage() == "test loop failed")
    assert failure.levelno == logging.ERROR and failure.exc_info is not None


async def test_a_wakeup_cuts_the_wait_short_and_one_set_before_the_wait_is_not_lost() -> None:
    wakeup = Wakeup()
    wakeup.set()  # before the wait: still counts
    with anyio.fail_after(1):
        await wakeup.wait(30)
    with anyio.fail_after(1):  # the 30 s wait ends as soon as it is set
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wakeup.wait, 30)
            await anyio.sleep(0.01)
            wakeup.set()
    started = anyio.current_time()
    await wakeup.wait(0.05)  # used up by the wait it ended: this one waits its full time
    assert anyio.current_time() - started >= 0.05


async def test_steps_at_once_give_their_results_in_order_and_the_first_failure_as_itself() -> None:
    async def slow() -> str:
        await anyio.sleep(0.05)
        return "slow"

    async def fast() -> int:
        return 7

    with anyio.fail_after(5):
        assert await at_once(slow, fast) == ["slow", 7]
    stopped: list[str] = []

    async def waits() -> None:
        try:
            await anyio.sleep(30)
        finally:
            stopped.append("waits")

    async def fails() -> None:
        await anyio.sleep(0.01)
        raise DatabaseBusyError("the database is busy")

    with anyio.fail_after(5), pytest.raises(DatabaseBusyError, match="the database is busy"):
        await at_once(waits, fails)  # not an ExceptionGroup, and not after the 30 s
    assert stopped == ["waits"]
