"""The event loop a build runs on: asyncio's, waiting in microseconds where epoll rounds to
milliseconds, so calls in flight end on time (figures: docs/engine.md, "Measurements")."""
from __future__ import annotations

import asyncio
import select
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class PreciseEpollSelector(selectors.EpollSelector):
    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            try:
                select.select([self.fileno()], [], [], timeout)  # readable once epoll holds an event
                timeout = 0
            except ValueError:  # a descriptor past select()'s limit: epoll's own wait, as asyncio's
                pass
        return super().select(timeout)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """asyncio's loop; on Linux, over the precise selector (elsewhere the selector's timeouts are
    not rounded to milliseconds: kqueue's are in nanoseconds)."""
    if selectors.DefaultSelector is getattr(selectors, "EpollSelector", None):
        return asyncio.SelectorEventLoop(PreciseEpollSelector())
    return asyncio.new_event_loop()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, on new_event_loop()."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coroutine)
