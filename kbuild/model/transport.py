"""How a call to an OpenAI-compatible server travels: the client (one per event loop), the
requests and tokens per minute, a body that is not JSON asked again, and the server's refusals
and failures turned into one line that says what to do.

Not part of any fingerprint. What decides a reply (the questions, their schemas, how a reply is
checked and asked again) is kbuild/model/openai_backend.py, whose source every model-backed
rule's fingerprint holds; mending how a call travels decides no reply, so an upgrade that only
touches this module makes no page stale.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
from aiolimiter import AsyncLimiter

from ..engine import Problem
from ..text.tokens import estimate_tokens
from .batchcalls import BatchCalls, BatchRefused
from .settings import ModelSettings

MALFORMED_BODY_RETRIES = 2


class FormatRefused(Exception):
    """The server refused the response format of a request (it takes no JSON schema, say)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Transport:
    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: object = None
        self._requests = AsyncLimiter(settings.requests_per_minute, 60) if settings.requests_per_minute else None
        self._tokens = AsyncLimiter(settings.tokens_per_minute, 60) if settings.tokens_per_minute else None

    def client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        s = self.settings
        if s.missing_key:
            raise Problem(f"{s.missing_key}; `kbuild check` and answers from the cache need neither")
        if self._client is None or self._client_loop is not loop:  # one client per event loop (per build)
            self._client = openai.AsyncOpenAI(api_key=s.api_key or "not-needed", base_url=s.base_url,
                                              timeout=s.timeout, max_retries=s.max_retries)
            self._client_loop = loop
        return self._client

    async def send(self, body: dict[str, Any]) -> Any:
        """The completion of `body`, within the requests and tokens per minute; the openai
        client's own errors pass through."""
        s = self.settings
        if self._requests:
            await self._requests.acquire()
        if self._tokens:
            estimate = sum(estimate_tokens(json.dumps(m["content"])) for m in body["messages"]) + body["max_tokens"]
            await self._tokens.acquire(min(estimate, s.tokens_per_minute or estimate))
        return await self.client().chat.completions.create(**body)

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
            except openai.APITimeoutError:
                raise Problem(f"{query_id}: the model server did not answer within {s.timeout:.0f} s, "
                              f"{s.max_retries + 1} times; try again later or raise `timeout`") from None
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


def api_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(error.get("message") or exc.message)
