"""How a call to an OpenAI-compatible server travels: the client (one per event loop), how many
requests go to the server at once, the requests and tokens per minute, silence, what is sent
again and when, and the server's refusals and failures turned into one line that says what to do.

Not part of any fingerprint. What decides a reply (the questions, their schemas, how a reply is
checked and asked again) is kbuild/model/openai_backend.py, whose source every model-backed
rule's fingerprint holds; mending how a call travels decides no reply, so an upgrade that only
touches this module makes no page stale.

Servers on the user's own machine (llama.cpp, Ollama, vLLM, LM Studio) answer a few requests at
once, queue the others without a byte, and may take minutes over one reply. So:

- Replies are streamed (OpenAI's own API excepted: see `streams`), and `timeout` is silence: a
  call fails when the server has sent it nothing for that long, never while its reply keeps
  coming. A request still waiting for the first chunk of its reply is not silent while the
  server is sending another of ours: it is queued behind it.
- No more requests go at once than the server serves (`Slots`): what llama.cpp reports
  (`GET /props`: `total_slots`), else what is learned from queueing, from one at a time on a
  local server; `concurrency` in the settings overrides both. OpenAI's own API is bounded by the
  engine's `max_calls` alone, as before.
- A request is sent again only when the server is surely not answering it: refused (429, 5xx),
  never reached, or its reply cut off by a dropped connection; never after a timeout, since the
  server may still be working on it and a second copy would double that work.
"""
from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import random
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai
from aiolimiter import AsyncLimiter
from openai.lib.streaming.chat import ChatCompletionStreamState

from ..engine import Problem
from ..text.tokens import estimate_tokens
from .batchcalls import BatchCalls, BatchRefused
from .settings import ModelSettings

MALFORMED_BODY_RETRIES = 2
PROBE_TIMEOUT = 5.0  # seconds for GET /props: a server that takes longer reports no slots
QUEUED_WAIT = 1.0  # seconds a first chunk must come later than expected before it counts as queueing
RETRY_AFTER_MAX = 60.0  # seconds of Retry-After honoured (as the openai client does); longer: own backoff
RETRYABLE = frozenset({408, 409, 429})  # and every 5xx

T = TypeVar("T")


class FormatRefused(Exception):
    """The server refused the response format of a request (it takes no JSON schema, say)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Silent(openai.OpenAIError):
    """The server sent nothing for `timeout` seconds: the request is given up, not sent again."""


@dataclass(eq=False)
class Flight:
    """One request between its sending and the end of its reply."""

    sent: float
    heard: float  # when the server last sent it a byte (when it was sent, before that)
    prompt_tokens: int
    others: tuple[Flight, ...]  # the requests in flight when it was sent
    first: float | None = None  # when the first chunk of its reply came
    ended: float | None = None


@dataclass(eq=False)
class Slots:
    """How many requests go to one server at once.

    `limit` None leaves them to the engine's `max_calls`. `learns` lowers the limit when the
    server refuses a request with a 503 while others of ours run (it has no free slot: KoboldCpp,
    llamafile); `learns_from_waits` also raises it by one when a request was served alongside as
    many others as the limit allows (its first chunk came while they all still ran) and more
    wait, and lowers it when a request's first chunk came only after one of ours ended and much
    later than a request alone waits for its prompt to be read (it was queued behind ours). Once
    lowered, it never grows past that again: the server showed what it serves."""

    limit: int | None
    learns: bool = False
    learns_from_waits: bool = False
    ceiling: int | None = None
    heard: float = 0.0  # when the server last sent a byte of any of our requests
    flying: list[Flight] = field(default_factory=list)
    waiting: int = 0
    alone: float = 0.0  # seconds per prompt token to the first chunk, the slowest seen with none other in flight
    _room: asyncio.Event | None = None
    _loop: object = None

    @asynccontextmanager
    async def taken(self, prompt_tokens: int) -> AsyncIterator[Flight]:
        """A place among the requests in flight, for as long as the block runs."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new build's event loop: what the last one had in flight is gone
            self._loop, self._room, self.flying, self.waiting = loop, asyncio.Event(), [], 0
        self.waiting += 1
        try:
            while self.limit is not None and len(self.flying) >= self.limit:
                assert self._room is not None
                await self._room.wait()
        finally:
            self.waiting -= 1
        now = loop.time()
        flight = Flight(sent=now, heard=now, prompt_tokens=max(prompt_tokens, 1), others=tuple(self.flying))
        self.flying.append(flight)
        answered = False
        try:
            yield flight
            answered = True
        finally:
            flight.ended = loop.time()
            self.flying.remove(flight)
            if answered:
                self._served(flight)
            self._free()

    def hear(self, flight: Flight, chunk: bool = True) -> None:
        """The server sent `flight` a chunk of its reply, or (`chunk` False) its status line:
        llama.cpp sends that when a slot takes the request, some servers at once, and a proxy
        before the server behind it has begun."""
        now = asyncio.get_running_loop().time()
        flight.heard = self.heard = now
        if chunk and flight.first is None:
            flight.first = now
            self._judge_wait(flight)

    def silent_since(self, flight: Flight) -> float:
        """When the server last gave `flight` a sign of life: before its first chunk, any byte of
        ours, since a server busy with one of our requests is not silent to the one it queued."""
        return flight.heard if flight.first is not None else max(flight.heard, self.heard)

    def refused_busy(self, flight: Flight) -> bool:
        """A 503 for `flight`: True when it says the server serves fewer than we sent (the limit
        is lowered, and the request waits for one of ours to end before it goes again)."""
        if not (self.learns and flight.others):
            return False
        self._lower(len(flight.others))
        return True

    def _judge_wait(self, flight: Flight) -> None:
        wait = flight.first - flight.sent if flight.first is not None else 0.0
        if not flight.others:
            self.alone = max(self.alone, wait / flight.prompt_tokens)
            return
        if not self.learns_from_waits:
            return
        after_one_ended = any(o.ended is not None for o in flight.others)
        if after_one_ended and wait > 2 * self.alone * flight.prompt_tokens + QUEUED_WAIT:
            self._lower(len(flight.others))

    def _served(self, flight: Flight) -> None:
        alongside = flight.first is not None and all(o.ended is None or o.ended > flight.first for o in flight.others)
        if (self.learns_from_waits and alongside and self.limit is not None and self.waiting
                and len(flight.others) + 1 >= self.limit and (self.ceiling is None or self.limit < self.ceiling)):
            self.limit += 1

    def _lower(self, served: int) -> None:
        self.limit = self.ceiling = max(1, min(served, self.limit or served))

    def _free(self) -> None:
        if self._room is not None:
            self._room.set()
            self._room = asyncio.Event()


class Transport:
    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: object = None
        self._requests = AsyncLimiter(settings.requests_per_minute, 60) if settings.requests_per_minute else None
        self._tokens = AsyncLimiter(settings.tokens_per_minute, 60) if settings.tokens_per_minute else None
        self.streams = not openai_itself(settings.base_url)  # OpenAI: one body, as before (no org check to stream)
        self._slots: Slots | None = None
        self._probing: asyncio.Lock | None = None

    def client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        s = self.settings
        if s.missing_key:
            raise Problem(f"{s.missing_key}; `kbuild check` and answers from the cache need neither")
        if self._client is None or self._client_loop is not loop:  # one client per event loop (per build)
            # no timeout of the client's own and no retries of its own: silence and what is sent
            # again are decided here, per request (see the module's docstring)
            self._client = openai.AsyncOpenAI(api_key=s.api_key or "not-needed", base_url=s.base_url,
                                              timeout=None, max_retries=0)
            self._client_loop = loop
            self._probing = asyncio.Lock()
        return self._client

    async def slots(self) -> Slots:
        """How many requests go to this server at once, found out before the first is sent."""
        client = self.client()
        assert self._probing is not None
        async with self._probing:
            if self._slots is None:
                self._slots = await self._find_slots(client)
        return self._slots

    async def _find_slots(self, client: openai.AsyncOpenAI) -> Slots:
        s = self.settings
        if s.concurrency is not None:
            return Slots(s.concurrency)
        if openai_itself(s.base_url):
            return Slots(None)
        reported = await server_slots(client, s.base_url or "")
        if reported is not None:
            return Slots(reported)
        local = is_local(s.base_url or "")
        return Slots(1 if local else None, learns=True, learns_from_waits=local)

    async def send(self, body: dict[str, Any]) -> Any:
        """The completion of `body`, within the server's slots and the requests and tokens per
        minute; sent again (`max_retries`) only when the server is surely not answering it. The
        openai client's errors pass through; `Silent` when the server sent nothing for `timeout`."""
        s = self.settings
        slots = await self.slots()
        prompt = sum(estimate_tokens(json.dumps(m["content"])) for m in body["messages"])
        tries = 0
        while True:
            async with slots.taken(prompt) as flight:
                if self._requests:
                    await self._requests.acquire()
                if self._tokens:
                    estimate = prompt + body["max_tokens"]
                    await self._tokens.acquire(min(estimate, s.tokens_per_minute or estimate))
                try:
                    return await self._within_silence(slots, flight, self._receive(body, slots, flight))
                except openai.APIStatusError as exc:
                    if exc.status_code == 503 and slots.refused_busy(flight):
                        continue  # not a try: it goes again once one of ours has ended
                    if not (exc.status_code in RETRYABLE or exc.status_code >= 500) or tries >= s.max_retries:
                        raise
                    pause = retry_after(exc.response.headers) or backoff(tries)
                except openai.APIConnectionError:  # refused, reset, or the reply cut off: nobody answers it
                    if tries >= s.max_retries:
                        raise
                    pause = backoff(tries)
            tries += 1
            await asyncio.sleep(pause)

    async def _receive(self, body: dict[str, Any], slots: Slots, flight: Flight) -> Any:
        """The completion, streamed and put together as the openai client's own helper does."""
        client = self.client()
        if not self.streams:  # nothing comes before the whole reply: nothing to hear, nothing to learn
            return await client.chat.completions.create(**body)
        state = ChatCompletionStreamState()
        chunks = 0
        async with await client.chat.completions.create(**body, stream=True,
                                                        stream_options={"include_usage": True}) as stream:
            slots.hear(flight, chunk=False)
            async for chunk in stream:
                slots.hear(flight)
                state.handle_chunk(chunk)
                chunks += 1
        if not chunks:
            raise ValueError("the stream ended without a reply")
        return state.current_completion_snapshot

    async def _within_silence(self, slots: Slots, flight: Flight, receiving: Awaitable[T]) -> T:
        """What `receiving` returns, unless the server stays silent to `flight` for `timeout`."""
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(receiving)
        try:
            while True:
                left = slots.silent_since(flight) + self.settings.timeout - loop.time()
                if left <= 0:
                    raise Silent(f"nothing for {self.settings.timeout:g} s")
                done, _ = await asyncio.wait({task}, timeout=left)
                if done:
                    return task.result()
        finally:
            if not task.done():
                task.cancel()  # closes the connection: llama.cpp, Ollama and vLLM stop generating
                await asyncio.wait({task})

    async def create(self, query_id: str, body: dict[str, Any]) -> Any:
        """The completion of `body` (`send`); FormatRefused when the server refuses its response
        format, a Problem saying what to do for any other failure."""
        s = self.settings
        attempt = 0
        while True:
            try:
                return await self.send(body)
            except openai.BadRequestError as exc:
                message = api_message(exc)
                if (getattr(exc, "param", None) == "response_format"
                        or any(w in message.lower() for w in ("response_format", "json_schema", "schema"))):
                    raise FormatRefused(message) from None
                raise Problem(f"{query_id}: the model server refused the request: {message}") from None
            except Silent:
                silence = "sent nothing for" if self.streams else "did not answer within"
                raise Problem(f"{query_id}: the model server {silence} {s.timeout:g} s; it was not asked again, "
                              "since it may still be answering: try again later, or raise `timeout`") from None
            except openai.APIConnectionError as exc:
                raise Problem(f"{query_id}: cannot reach the model server at {s.base_url or 'api.openai.com'} "
                              f"({exc.__cause__ or exc}); is it running?") from None
            except openai.RateLimitError as exc:
                raise Problem(f"{query_id}: the model server kept refusing for rate limits after "
                              f"{s.max_retries + 1} tries ({api_message(exc)}); try again later or "
                              "lower `requests_per_minute`") from None
            except openai.APIStatusError as exc:
                raise Problem(f"{query_id}: the model server failed with {exc.status_code} after "
                              f"{s.max_retries + 1} tries: {api_message(exc)}") from None
            except (json.JSONDecodeError, ValueError) as exc:
                attempt += 1
                if attempt > MALFORMED_BODY_RETRIES:
                    raise Problem(f"{query_id}: the model server's reply was not valid JSON "
                                  f"{attempt} times ({exc})") from None

    @staticmethod
    def from_batch(query_id: str, batch: BatchCalls, custom_id: str, body: dict[str, Any]) -> Any:
        """A batch's answer to `body`; CallDeferred when none has come yet (the query waits)."""
        try:
            return batch.completion(custom_id, body)
        except BatchRefused as exc:
            raise Problem(f"{query_id}: the model server refused the request in its batch: {exc}") from None


async def server_slots(client: openai.AsyncOpenAI, base_url: str) -> int | None:
    """The requests a llama.cpp server serves at once (`GET /props`: `total_slots`, its `-np`);
    None from a server that does not say (Ollama, vLLM, LM Studio: a 404)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        props = await client.get(f"{root}/props", cast_to=object,
                                 options={"timeout": PROBE_TIMEOUT, "max_retries": 0})
    except (openai.OpenAIError, ValueError):
        return None
    slots = props.get("total_slots") if isinstance(props, dict) else None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


def openai_itself(base_url: str | None) -> bool:
    host = urllib.parse.urlsplit(base_url or "https://api.openai.com/v1").hostname or ""
    return host.endswith(("openai.com", "openai.azure.com"))


def is_local(base_url: str) -> bool:
    """A server on this machine or its network (loopback, a private address, a name without a
    domain such as a container's): it serves few requests at once."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith((".local", ".internal", ".lan", ".localhost"))
    return address.is_loopback or address.is_private or address.is_link_local


def retry_after(headers: Any) -> float | None:
    """The wait a 429 or 5xx asks for (`retry-after-ms`, `retry-after` in seconds or as a date),
    when it is one to honour."""
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * unit
        except ValueError:
            when = email.utils.parsedate_tz(value)
            seconds = email.utils.mktime_tz(when) - time.time() if when else -1
        if 0 < seconds <= RETRY_AFTER_MAX:
            return seconds
    return None


def backoff(tries: int) -> float:
    """The openai client's own: 0.5 s doubling to 8 s, less up to a quarter at random."""
    return min(0.5 * 2 ** tries, 8.0) * (1 - 0.25 * random.random())


def api_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(error.get("message") or exc.message)
