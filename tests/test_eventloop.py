"""The build's event loop: asyncio's, over a selector that waits in microseconds, not in whole
milliseconds (kbuild/engine/eventloop.py; its effect is measured by benchmarks/scheduling.py)."""
from __future__ import annotations

import asyncio
import selectors
import socket

import pytest

from kbuild.engine import eventloop
from kbuild.engine.eventloop import PreciseEpollSelector

linux = pytest.mark.skipif(not hasattr(selectors, "EpollSelector"), reason="epoll is Linux's")


def test_a_build_loop_runs_timers_sockets_and_threads_as_asyncio_does():
    async def main() -> list[str]:
        seen: list[str] = []
        loop = asyncio.get_running_loop()
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        with reader, writer:
            loop.call_later(0.003, seen.append, "later")
            loop.call_later(0.0005, seen.append, "sooner")
            loop.call_soon(writer.send, b"x")
            seen.append((await loop.sock_recv(reader, 1)).decode())
            seen.append(await asyncio.to_thread(lambda: "thread"))
            await asyncio.sleep(0.005)
        return seen

    seen = eventloop.run(main())
    assert seen.index("sooner") < seen.index("later") and {"x", "thread"} <= set(seen)


@linux
def test_on_linux_the_loop_waits_on_epoll_through_select():
    loop = eventloop.new_event_loop()
    try:
        assert isinstance(loop._selector, PreciseEpollSelector)  # type: ignore[attr-defined]
    finally:
        loop.close()


@linux
@pytest.mark.parametrize("select_refuses", [False, True], ids=["select", "a descriptor past select's limit"])
def test_the_selector_reports_what_is_ready_and_waits_out_a_short_timeout(monkeypatch, select_refuses):
    if select_refuses:
        def refuse(*args: object) -> None:
            raise ValueError("filedescriptor out of range in select()")

        monkeypatch.setattr(eventloop.select, "select", refuse)
    reader, writer = socket.socketpair()
    with reader, writer, PreciseEpollSelector() as selector:
        selector.register(reader, selectors.EVENT_READ)
        assert selector.select(0.0003) == []
        writer.send(b"x")
        assert [(key.fileobj, events) for key, events in selector.select(5)] == [(reader, selectors.EVENT_READ)]
        assert [key.fileobj for key, _ in selector.select(None)] == [reader]


def test_elsewhere_the_loop_is_asyncios_own(monkeypatch):
    monkeypatch.setattr(eventloop.selectors, "DefaultSelector", selectors.SelectSelector)
    loop = eventloop.new_event_loop()
    try:
        assert not isinstance(getattr(loop, "_selector", None), PreciseEpollSelector)
    finally:
        loop.close()
