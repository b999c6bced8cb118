"""A real HTTP server that speaks the OpenAI chat-completions protocol, scripted by a test.

Tests point the official ``openai`` client at it (everything goes over real sockets on
127.0.0.1; nothing in the client is mocked)::

    from openai_server import Fault, Reply, ScriptedServer

    with ScriptedServer(lambda request: Reply("hello", delay=0.1)) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        server.fail_next(Fault("429", retry_after=0.1), Fault("reset"))
        assert len(server.requests) == 1

The server starts listening in ``__init__`` (so ``url`` is usable straight away, with or without
``with``); ``close()`` (or leaving the ``with`` block) stops it. ``close()`` never hangs: handler
threads are daemons, a handler sleeping for ``Reply.delay`` or a ``"timeout"`` fault wakes up at
once, and open keep-alive connections are shut down.

Endpoints:

* ``POST /v1/chat/completions``: the body is parsed and appended to ``requests``, then the next
  queued fault (``fail_next``) is applied if there is one, else the reply is sent: status 200,
  ``Content-Type: application/json``, the exact OpenAI ``chat.completion`` shape (id
  ``chatcmpl-N`` for ``requests[N - 1]``, ``model`` echoed from the request).
  ``"stream": true`` is refused with a 400 (not implemented). A body that is not a JSON object gets
  a 400 and is not recorded.
* ``POST /v1/embeddings``: the body is appended to ``embedding_requests``; the answer is one
  vector per input, a hashed bag of words (``hashed_vector``: deterministic, and texts sharing
  words are near), as floats or, with ``"encoding_format": "base64"``, as base64 float32. It
  refuses what OpenAI refuses, with a 400: no ``model``, an empty or missing ``input``, an empty
  string in it, more than 2,048 inputs, or an ``encoding_format`` other than those two. A queued
  status fault (``fail_next("500")``) is applied here too.
* ``GET /v1/models``: a list holding ``self.model``.
* Anything else: 404 with an OpenAI-style error body.

``json_schema=False`` simulates a server without structured outputs: a request whose
``response_format.type`` is ``"json_schema"`` gets a 400 (``openai.BadRequestError``).
A queued fault is applied before that check (and is consumed by that request).

A ``json_schema`` response format with ``"strict": true`` is held to OpenAI's documented rules for
strict mode (``strict_schema_errors``), as api.openai.com holds it: a schema that breaks one gets
the 400 OpenAI sends ("Invalid schema for response_format ..."), so a test fails wherever kbuild
would send a schema that OpenAI refuses. ``string_bounds=True`` also admits ``minLength`` and
``maxLength``, as llama.cpp's and vLLM's grammars do (OpenAI does not). ``logprobs=False``
refuses a request that asks for logprobs with a 400, as some servers do.

How the real ``openai`` client (3.57, over httpx2) sees each fault, with ``max_retries=0``
(checked by ``tests/test_openai_server.py``, sync and async clients alike):

* ``429``: ``openai.RateLimitError`` (``status_code == 429``, ``body`` is the inner ``error``
  dict). When retrying, the client waits exactly ``Retry-After`` (float seconds accepted) if it
  is in (0, 120] instead of its own backoff (0.5 s, 1 s, ... with jitter), and does not retry at
  all when it is above 120 s.
* ``500``/``502``/``503``: ``openai.InternalServerError`` (an ``APIStatusError``) for all three.
* ``reset``: ``openai.APIConnectionError("Connection error.")``, not ``APITimeoutError``; the
  ``__cause__`` is an httpx2 transport error (``ReadError`` "Connection reset by peer" on a
  kept-alive connection, ``RemoteProtocolError`` possible on a fresh one).
* ``timeout``: ``openai.APITimeoutError`` (itself an ``APIConnectionError``, so catch it first)
  once the client's read timeout passes. The server answers later to a closed socket, quietly.
* ``truncated``: ``openai.APIConnectionError``; the cause is ``httpx2.RemoteProtocolError``
  ("peer closed connection without sending complete message body").
* ``invalid_json``: NOT an ``openai`` exception. The body is sent with ``Content-Type:
  application/json``, and ``json.JSONDecodeError`` (a ``ValueError``) escapes from ``create()``.
  It is never retried (the status is 200), whatever ``max_retries`` is, and code that catches
  only ``openai.OpenAIError`` lets it through. (Had the Content-Type not been JSON, ``create()``
  would instead *return the body as a plain str* instead of a ``ChatCompletion``.)
* ``empty``: no exception; a normal completion whose ``message.content`` is ``""`` (the
  ``reply`` callable is not called).

With the client's default ``max_retries=2`` every fault except ``invalid_json`` and ``empty``
is retried (``timeout`` after the client's timeout, the others after its backoff); a fault is
consumed by the attempt it hits, so the retry gets the next fault or a reply, and ``requests``
holds one entry per attempt.

If the ``reply`` callable raises, the request gets a 500 whose message names the exception, and
the exception is appended to ``errors`` (so a test can assert ``server.errors == []``); so is any
other unexpected exception in a handler. Nothing is ever written to stderr.
"""
from __future__ import annotations

import base64
import collections
import hashlib
import json
import math
import re
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Literal

__all__ = ["Fault", "Reply", "ScriptedServer"]

FaultKind = Literal["429", "500", "502", "503", "reset", "timeout", "truncated", "invalid_json", "empty"]
FAULT_KINDS: frozenset[str] = frozenset(FaultKind.__args__)  # type: ignore[attr-defined]


@dataclass
class Reply:
    """One assistant message and how to send it."""

    content: str
    prompt_tokens: int | None = None  # default: words in all the request's messages
    completion_tokens: int | None = None  # default: words in content
    # per generated token: (token, logprob, top_logprobs {token: logprob}); sent in
    # choices[0].logprobs.content when given (whether or not the request asked for logprobs),
    # else choices[0].logprobs is null.
    logprobs: list[tuple[str, float, dict[str, float]]] | None = None
    delay: float = 0.0  # seconds to wait before answering (slow replies, observable concurrency)
    finish_reason: str = "stop"


@dataclass
class Fault:
    """What goes wrong with one request (see the module docstring for what the client sees)."""

    kind: FaultKind
    retry_after: float | None = None  # for "429": sent as a Retry-After header (seconds)
    delay: float = 5.0  # for "timeout": how long to hang before answering normally

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {sorted(FAULT_KINDS)}")


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts ({"type": "text", ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)


def count_words(request: dict) -> int:
    """The default prompt_tokens: the words in all the request's messages."""
    messages = request.get("messages") or []
    return sum(len(message_text(m.get("content")).split()) for m in messages if isinstance(m, dict))


def echo_reply(request: dict) -> str:
    """The default reply: a valid JSON object {"echo": <the last user message>}."""
    users = [m for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return json.dumps({"echo": message_text(users[-1].get("content")) if users else ""})


# OpenAI's structured outputs guide, "Supported schemas": the keywords strict mode accepts. Anything
# else (minLength, maxLength, allOf, not, if/then/else, patternProperties, default, uniqueItems,
# min/maxProperties...) is refused with a 400 before the model runs.
STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "$defs",
    "definitions", "description", "title",
    "pattern", "format",  # strings
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",  # numbers
    "minItems", "maxItems",  # arrays
})
STRING_BOUNDS = frozenset({"minLength", "maxLength"})
STRICT_MAX_DEPTH = 10  # nesting levels of objects
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def strict_schema_errors(schema: Any, *, string_bounds: bool = False) -> list[str]:
    """Why OpenAI would refuse `schema` in strict mode (empty when it would accept it).

    The rules: the root is an object (not anyOf); every object lists every property in
    ``required`` and sets ``additionalProperties: false``; only supported keywords appear; every
    ``$ref`` resolves inside the schema; objects nest at most 10 deep."""
    errors: list[str] = []
    allowed = STRICT_KEYWORDS | (STRING_BOUNDS if string_bounds else frozenset())
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return ["the root schema must be an object, not anyOf or another type"]

    def resolves(ref: str) -> bool:
        node: Any = schema
        for part in ref.removeprefix("#/").split("/") if ref.startswith("#/") else [None]:
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return isinstance(node, dict)

    def walk(node: Any, where: tuple[str, ...], depth: int) -> None:
        if not isinstance(node, dict):
            errors.append(f"In context={where}, a schema must be an object")
            return
        for key in node:
            if key not in allowed:
                errors.append(f"In context={where}, '{key}' is not permitted")
        if "$ref" in node and not resolves(str(node["$ref"])):
            errors.append(f"In context={where}, reference {node['$ref']} can't be resolved")
        kind = node.get("type")
        if kind == "object" or "properties" in node:
            if depth > STRICT_MAX_DEPTH:
                errors.append(f"In context={where}, objects nest more than {STRICT_MAX_DEPTH} levels")
            if node.get("additionalProperties") is not False:
                errors.append(f"In context={where}, 'additionalProperties' is required to be supplied and to be false")
            properties = node.get("properties") or {}
            missing = [name for name in properties if name not in (node.get("required") or [])]
            if missing:
                errors.append(f"In context={where}, 'required' is required to be supplied and to be an array "
                              f"including every key in properties. Missing '{missing[0]}'")
            for name, sub in properties.items():
                walk(sub, (*where, "properties", name), depth + 1)
        if isinstance(node.get("items"), dict):
            walk(node["items"], (*where, "items"), depth)
        for i, sub in enumerate(node.get("anyOf") or []):
            walk(sub, (*where, "anyOf", str(i)), depth)
        for defs in ("$defs", "definitions"):
            for name, sub in (node.get(defs) or {}).items():
                walk(sub, (*where, defs, name), depth)

    walk(schema, (), 1)
    return errors


EMBEDDING_DIMS = 64
MAX_EMBEDDING_INPUTS = 2048  # OpenAI's limit


def hashed_vector(text: str, dims: int = EMBEDDING_DIMS) -> list[float]:
    """A text's words hashed into `dims` counts, normalised: the same text gives the same vector,
    and texts that share words have a high cosine (a stand-in for meaning that tests can predict)."""
    counts = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        counts[digest[0] % dims] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(c * c for c in counts)) or 1.0
    return [c / norm for c in counts]


def embedding_errors(request: dict) -> str:
    """What OpenAI answers with a 400 to this /embeddings body, or "" when it takes it."""
    if not request.get("model"):
        return "you must provide a model parameter"
    given = request.get("input")
    if given is None or given == [] or given == "":
        return "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
    inputs = [given] if isinstance(given, str) else given
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        return "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
    if len(inputs) > MAX_EMBEDDING_INPUTS:
        return (f"Invalid 'input': maximum length of array is {MAX_EMBEDDING_INPUTS}, "
                f"but got an array with length {len(inputs)}.")
    if any(not i for i in inputs):
        return "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
    if request.get("encoding_format", "float") not in ("float", "base64"):
        return f"Invalid value for 'encoding_format': {request['encoding_format']!r}."
    return ""


def error_body(message: str, type_: str, *, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


STATUS_ERRORS = {
    "429": (429, "Rate limit reached for requests (scripted)", "requests", "rate_limit_exceeded"),
    "500": (500, "The server had an error while processing your request (scripted)", "server_error", None),
    "502": (502, "Bad gateway (scripted)", "server_error", None),
    "503": (503, "The server is overloaded or not ready yet (scripted)", "server_error", None),
}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # close() never waits for a handler
    allow_reuse_address = True
    scripted: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that went away is expected; anything else goes to ``errors``."""
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, OSError):  # ConnectionError is an OSError
            with self.scripted._lock:
                self.scripted.errors.append(exc)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real API server
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.server.scripted._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.scripted._track(self.connection, False)

    # --- sending -----------------------------------------------------------------------------

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(status, json.dumps(body).encode(), headers)

    def send_bytes(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def reset(self) -> None:
        """Close the connection abortively (RST, nothing sent)."""
        self.close_connection = True
        sock = self.connection
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        # The socket's file descriptor is only released once rfile and wfile are closed too.
        for f in (self.rfile, self.wfile):
            try:
                f.close()
            except OSError:
                pass
        sock.close()

    # --- requests ----------------------------------------------------------------------------

    def do_GET(self) -> None:
        scripted = self.server.scripted
        with scripted._in_flight():
            if self.path.rstrip("/") == "/v1/models":
                model = {"id": scripted.model, "object": "model", "created": 0, "owned_by": "scripted"}
                self.send_json(200, {"object": "list", "data": [model]})
            else:
                self.not_found()

    def do_POST(self) -> None:
        scripted = self.server.scripted
        with scripted._in_flight():
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            endpoint = self.path.split("?")[0].rstrip("/")
            if endpoint not in ("/v1/chat/completions", "/v1/embeddings"):
                self.not_found()
                return
            try:
                request = json.loads(raw)
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                self.send_json(400, error_body(f"the body is not a JSON object: {exc}", "invalid_request_error"))
                return
            try:
                if endpoint == "/v1/embeddings":
                    scripted._embed(self, request)
                else:
                    scripted._answer(self, request)
            except (ConnectionError, OSError):
                pass  # the client went away (it timed out, or we reset it)

    def not_found(self) -> None:
        self.send_json(404, error_body(f"Unknown request URL: {self.command} {self.path}", "invalid_request_error",
                                       code="unknown_url"))


class ScriptedServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1, scripted by the test.

    Listens from ``__init__`` until ``close()``; a context manager too (``__exit__`` closes).
    ``reply(request_json)`` gives the assistant content (``str``) or a ``Reply``; the default
    echoes ``{"echo": <last user message>}`` as a JSON object. See the module docstring.
    """

    def __init__(
        self,
        reply: Callable[[dict], str | Reply] | None = None,
        *,
        json_schema: bool = True,
        string_bounds: bool = False,
        logprobs: bool = True,
        model: str = "scripted",
        embed: Callable[[str], list[float]] | None = None,
    ) -> None:
        self.reply = reply or echo_reply
        self.embed = embed or hashed_vector  # an input's vector, for /embeddings
        self.json_schema = json_schema
        self.string_bounds = string_bounds
        self.logprobs = logprobs
        self.model = model
        self.requests: list[dict] = []  # every chat-completions body, in arrival order
        self.embedding_requests: list[dict] = []  # every /embeddings body, in arrival order
        self.errors: list[BaseException] = []  # raised by the reply callable (or a handler bug)
        # The most requests (of any endpoint) between receipt and the end of their response at the
        # same time; in_flight is the count now.
        self.max_in_flight = 0
        self.in_flight = 0
        self._lock = threading.Lock()
        self._faults: collections.deque[Fault] = collections.deque()
        self._connections: set[socket.socket] = set()
        self._closing = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.scripted = self
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"ScriptedServer:{port}", daemon=True)
        self._thread.start()

    # --- control -----------------------------------------------------------------------------

    def fail_next(self, *faults: Fault | str) -> None:
        """The next len(faults) chat requests get these faults, in order; then replies resume.

        Calls add to the queue. A string is shorthand for ``Fault(kind)``.
        """
        parsed = [f if isinstance(f, Fault) else Fault(f) for f in faults]  # type: ignore[arg-type]
        with self._lock:
            self._faults.extend(parsed)

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()  # wakes handlers sleeping in a delay
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for sock in connections:  # idle keep-alive connections: their threads return
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ScriptedServer({self.url}, {len(self.requests)} requests)"

    # --- internals (called from handler threads) ---------------------------------------------

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(sock)

    class _InFlight:
        def __init__(self, server: ScriptedServer) -> None:
            self.server = server

        def __enter__(self) -> None:
            s = self.server
            with s._lock:
                s.in_flight += 1
                s.max_in_flight = max(s.max_in_flight, s.in_flight)

        def __exit__(self, *exc_info: object) -> None:
            with self.server._lock:
                self.server.in_flight -= 1

    def _in_flight(self) -> ScriptedServer._InFlight:
        return ScriptedServer._InFlight(self)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)

    def _embed(self, handler: _Handler, request: dict) -> None:
        with self._lock:
            self.embedding_requests.append(request)
            fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind in STATUS_ERRORS:
            status, message, type_, code = STATUS_ERRORS[fault.kind]
            handler.send_json(status, error_body(message, type_, code=code))
            return
        refused = embedding_errors(request)
        if refused:
            handler.send_json(400, error_body(refused, "invalid_request_error", param="input"))
            return
        inputs = [request["input"]] if isinstance(request["input"], str) else request["input"]
        vectors = [self.embed(text) for text in inputs]
        encode = request.get("encoding_format", "float") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if encode else v}
                for i, v in enumerate(vectors)]
        tokens = sum(len(str(text).split()) for text in inputs)
        handler.send_json(200, {"object": "list", "data": data, "model": request["model"],
                                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _answer(self, handler: _Handler, request: dict) -> None:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            fault = self._faults.popleft() if self._faults else None

        if fault is not None and fault.kind in STATUS_ERRORS:
            status, message, type_, code = STATUS_ERRORS[fault.kind]
            headers = {}
            if fault.kind == "429" and fault.retry_after is not None:
                headers["Retry-After"] = format(fault.retry_after, "g")
            handler.send_json(status, error_body(message, type_, code=code), headers)
            return
        if fault is not None and fault.kind == "reset":
            handler.reset()
            return
        if fault is not None and fault.kind == "invalid_json":
            handler.send_bytes(200, b'<html><body>upstream said: {"id": "chatcmpl-</body></html>')
            return
        if fault is not None and fault.kind == "timeout":
            self._sleep(fault.delay)
            if self._closing.is_set():
                handler.reset()
                return

        response_format = request.get("response_format")
        if (not self.json_schema and isinstance(response_format, dict)
                and response_format.get("type") == "json_schema"):
            handler.send_json(400, error_body("response_format json_schema is not supported",
                                              "invalid_request_error", param="response_format"))
            return
        if request.get("logprobs") and not self.logprobs:
            handler.send_json(400, error_body("logprobs is not supported by this server", "invalid_request_error",
                                              param="logprobs"))
            return
        refused = self._refused_format(response_format)
        if refused:
            handler.send_json(400, error_body(refused, "invalid_request_error", param="response_format"))
            return
        if request.get("stream"):
            handler.send_json(400, error_body("stream is not supported by ScriptedServer",
                                              "invalid_request_error", param="stream"))
            return

        try:
            reply = Reply("") if fault is not None and fault.kind == "empty" else self.reply(request)
            if isinstance(reply, str):
                reply = Reply(reply)
            if not isinstance(reply, Reply):
                raise TypeError(f"reply returned {type(reply).__name__}, not str or Reply")
        except Exception as exc:  # a bug in the test's reply callable: visible, not a hang
            with self._lock:
                self.errors.append(exc)
            handler.send_json(500, error_body(f"reply callable raised {exc!r}", "server_error"))
            return
        self._sleep(reply.delay)
        if self._closing.is_set():
            handler.reset()
            return
        body = json.dumps(self._completion(request, reply, number)).encode()
        if fault is not None and fault.kind == "truncated":
            handler.close_connection = True
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body[: len(body) // 2])
            handler.wfile.flush()
            return
        handler.send_bytes(200, body)

    def _refused_format(self, response_format: Any) -> str:
        """OpenAI's 400 for a json_schema response format it would not accept ("" when it would)."""
        if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
            return ""
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or not SCHEMA_NAME.match(str(spec.get("name", ""))):
            return "Invalid 'response_format.json_schema.name': must match ^[a-zA-Z0-9_-]{1,64}$"
        if spec.get("strict") is not True:
            return ""
        errors = strict_schema_errors(spec.get("schema"), string_bounds=self.string_bounds)
        return f"Invalid schema for response_format '{spec['name']}': {errors[0]}." if errors else ""

    def _completion(self, request: dict, reply: Reply, number: int) -> dict:
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else count_words(request)
        completion = reply.completion_tokens if reply.completion_tokens is not None else len(reply.content.split())
        logprobs = None
        if reply.logprobs is not None:
            logprobs = {"content": [
                {
                    "token": token,
                    "logprob": logprob,
                    "bytes": list(token.encode()),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top.items()],
                }
                for token, logprob, top in reply.logprobs
            ]}
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
                "logprobs": logprobs,
            }],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }
