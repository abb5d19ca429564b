"""Background loops: one supervisor for every piece of work the server repeats on its own
(embedding backfill, jobs, retention, keyword merging, loading the indexes), so that each
loop backs off, logs and survives failures the same way.

A loop is a *step*: an async function that does one round of work and returns how many
seconds to wait before the next round (0: go on at once; None: the work is done, stop).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ollama_mcp.errors import OllamaMcpError

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[float | None]]
FIRST_RETRY_SECONDS = 1.0


@asynccontextmanager
async def beside() -> AsyncIterator[TaskGroup]:
    """A task group for work that runs beside the block: cancelled when the block ends, and an
    exception of the block's re-raised as itself, not wrapped in an ExceptionGroup (callers
    translate our errors by type)."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        try:
            yield tasks
        except Exception as exc:
            failure = exc
        finally:
            tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def at_once(*steps: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Run ``steps`` at once and return their results in order; the first failure is raised as
    itself (not in an ExceptionGroup: callers translate our errors by type), once the other
    steps have stopped."""
    results: list[Any] = [None] * len(steps)
    failures: list[Exception] = []

    async def run(slot: int, step: Callable[[], Awaitable[Any]]) -> None:
        try:
            results[slot] = await step()
        except Exception as exc:  # re-raised below, once every step has stopped
            failures.append(exc)
            tasks.cancel_scope.cancel()

    async with anyio.create_task_group() as tasks:
        for slot, step in enumerate(steps):
            tasks.start_soon(run, slot, step)
    if failures:
        raise failures[0]
    return results


class Wakeup:
    """Cuts a loop's wait short: ``set`` it when there is work to do now (a memory stored
    without its vector, a job queued)."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, seconds: float) -> None:
        """Wait ``seconds``, or less if ``set`` is called meanwhile (or was since the last wait)."""
        with anyio.move_on_after(seconds):
            await self._event.wait()
        self._event = anyio.Event()


async def supervise(
    what: str,
    step: Step,
    *,
    wakeup: Wakeup | None = None,
    max_delay: float = 60.0,
    initial_delay: float = 0.0,
) -> None:
    """Run ``step`` until it returns None (or forever); cancel to stop.

    Our own errors (Ollama down, the database busy) are logged once per distinct message and
    retried after 1 s, doubling up to ``max_delay``; anything else is a bug, logged with its
    stack and retried after ``max_delay``. Nothing a step raises ends the loop or reaches the
    tools.
    """
    if initial_delay:
        await _pause(wakeup, initial_delay)
    delay, last_error = FIRST_RETRY_SECONDS, ""
    while True:
        try:
            wait = await step()
            delay, last_error = FIRST_RETRY_SECONDS, ""
        except OllamaMcpError as exc:
            message = str(exc)
            (log.debug if message == last_error else log.warning)("%s postponed: %s", what, message)
            wait, last_error = delay, message
            delay = min(delay * 2, max_delay)
        except Exception:  # a bug: logged, and never allowed to take the tools down with it
            log.exception("%s failed", what)
            wait = max_delay
        if wait is None:
            return
        if wait > 0:
            await _pause(wakeup, wait)


async def _pause(wakeup: Wakeup | None, seconds: float) -> None:
    if wakeup is None:
        await anyio.sleep(seconds)
    else:
        await wakeup.wait(seconds)
