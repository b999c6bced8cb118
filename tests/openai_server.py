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
  ``chatcmpl-N`` for ``requests[N - 1]``, ``model`` echoed from the request). A body that is not a
  JSON object gets a 400 and is not recorded.

  With ``"stream": true`` the reply is streamed as OpenAI and llama.cpp stream it (checked against
  llama-server 0.6.0): ``Content-Type: text/event-stream``, a chunked body of ``data: {...}``
  events, each a ``chat.completion.chunk`` (the role first with ``content: ""``, then one token
  each, ``Reply.tokens()``, with its logprobs when the reply has them, then an empty delta with
  the finish reason), then ``data: [DONE]``. With ``stream_options: {"include_usage": true}`` every
  chunk carries ``"usage": null`` and a last chunk with ``choices: []`` carries the usage; without it
  no chunk has a usage. ``stream_options`` without ``stream`` is refused with OpenAI's 400.
  ``Reply.delay`` passes before the first token (a server reading the prompt: the status line has
  gone out, nothing else), ``Reply.pace`` between tokens; a reply that is not streamed arrives
  whole after both. A client that leaves before its reply ends is counted in ``abandoned`` and the
  reply stops being generated, as llama.cpp cancels the task of a closed connection.

  ``slots=N`` serves at most N chat completions at once, as ``llama-server -np N`` does: the others
  wait in arrival order, silent (llama.cpp sends not even the status line before a slot takes a
  request), and ``GET /props`` answers ``{"total_slots": N, ...}`` (``report_slots=False``: a
  404, as from Ollama, vLLM or OpenAI, which report no slots). ``queue=False`` answers a request
  that finds every slot busy with a 503 "no slot available" instead (KoboldCpp, llamafile).
  ``generating``/``max_generating`` and ``queued``/``max_queued`` count the requests holding and
  waiting for a slot, now and at most; ``refused_busy`` the 503s.
* ``POST /v1/embeddings``: the body is appended to ``embedding_requests``; the answer is one
  vector per input, a hashed bag of words (``hashed_vector``: deterministic, and texts sharing
  words are near), as floats or, with ``"encoding_format": "base64"``, as base64 float32. It
  refuses what OpenAI refuses, with a 400: no ``model``, an empty or missing ``input``, an empty
  string in it, more than 2,048 inputs, or an ``encoding_format`` other than those two. A queued
  status fault (``fail_next("500")``) is applied here too.
* ``GET /v1/models``: a list holding ``self.model``.
* ``GET /props``: llama.cpp's server properties, with ``slots`` (see above).
* ``/v1/files`` and ``/v1/batches``: OpenAI's Files and Batch APIs, with the batches' states moved
  by the test (``server.batch_service``; see ``BatchService``).
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

On a streamed request the status faults and ``reset`` come before the stream, as above;
``timeout`` is silence before the status line (``APITimeoutError`` from ``create()``);
``truncated`` ends the connection halfway through the chunked body (``APIConnectionError`` while
iterating); ``invalid_json`` streams one ``data:`` event that is not JSON (``json.JSONDecodeError``
while iterating); ``empty`` streams a reply without tokens.

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
import select
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Literal

__all__ = ["BatchService", "Fault", "Reply", "ScriptedServer"]

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
    delay: float = 0.0  # seconds before the first token (a server reading the prompt), or before a whole reply
    pace: float = 0.0  # seconds per generated token: a streamed reply comes a token at a time, a whole one after all
    finish_reason: str = "stop"

    def tokens(self) -> list[str]:
        """The content cut into the tokens a stream sends, one chunk each: a word with the
        whitespace before it (so that there are as many as the default completion_tokens)."""
        return re.findall(r"\s*\S+|\s+$", self.content)


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


def _client_gone(sock: socket.socket) -> bool:
    """The client closed its connection: it is readable and holds nothing (a client sends
    nothing more on a connection before its reply ends)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


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

    def start_stream(self) -> None:
        """The status line and headers of a server-sent event stream, its body chunked (HTTP/1.1)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def send_event(self, data: str) -> None:
        """One `data:` event, as one HTTP chunk, at once."""
        event = f"data: {data}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
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
            if scripted.batch_service.handle(self, "GET", b""):
                return
            if self.path.rstrip("/") == "/v1/models":
                model = {"id": scripted.model, "object": "model", "created": 0, "owned_by": "scripted"}
                self.send_json(200, {"object": "list", "data": [model]})
            elif self.path.rstrip("/") == "/props" and scripted.slots is not None and scripted.report_slots:
                self.send_json(200, {"total_slots": scripted.slots, "model_path": f"{scripted.model}.gguf",
                                     "default_generation_settings": {"n_ctx": 4096}, "build_info": "scripted"})
            else:
                self.not_found()

    def do_POST(self) -> None:
        scripted = self.server.scripted
        with scripted._in_flight():
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if scripted.batch_service.handle(self, "POST", raw):
                return
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


class _Slot:
    """A slot one reply holds, released once (when its last token is made, or when it ends)."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.held = True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with self.server._lock:
            self.server.generating -= 1
        if self.server._free_slots is not None:
            self.server._free_slots.release()


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
        slots: int | None = None,
        report_slots: bool = True,
        queue: bool = True,
    ) -> None:
        self.reply = reply or echo_reply
        self.slots = slots  # None: every chat request is answered at once
        self.report_slots = report_slots  # GET /props says total_slots (llama.cpp); False: 404 (Ollama)
        self.queue = queue  # a request that finds every slot busy waits; False: a 503 (KoboldCpp, llamafile)
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
        # Chat requests holding a slot (generating) and waiting for one (queued), now and at most;
        # abandoned: replies whose client left before their end (the server stopped generating them)
        self.generating = self.max_generating = 0
        self.queued = self.max_queued = 0
        self.abandoned = 0
        self.refused_busy = 0  # 503s for every slot busy (queue=False)
        self._lock = threading.Lock()
        self._free_slots = threading.Semaphore(slots) if slots else None
        self._faults: collections.deque[Fault] = collections.deque()
        self._connections: set[socket.socket] = set()
        self._closing = threading.Event()
        self.batch_service = BatchService(self)  # /v1/files and /v1/batches (see BatchService)
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
        if fault is not None and fault.kind == "invalid_json" and not request.get("stream"):
            handler.send_bytes(200, b'<html><body>upstream said: {"id": "chatcmpl-</body></html>')
            return
        if fault is not None and fault.kind == "timeout":
            self._sleep(fault.delay)
            if self._closing.is_set():
                handler.reset()
                return

        refusal = self._refusal(request)
        if refusal is not None:
            handler.send_json(400, refusal)
            return
        reply = self._reply_to(request, empty=fault is not None and fault.kind == "empty")
        if not isinstance(reply, Reply):
            handler.send_json(500, reply)
            return
        slot = self._take_slot(handler)
        if slot is None:
            return
        try:
            if request.get("stream"):
                self._stream(handler, request, reply, number, fault.kind if fault else None, slot)
                return
            if not self._generate(handler, reply.delay + reply.pace * len(reply.tokens())):
                return
            slot.release()  # generated: the slot is free while the reply is on its way, as in llama.cpp
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
        finally:
            slot.release()

    def _stream(self, handler: _Handler, request: dict, reply: Reply, number: int, fault: str | None,
                slot: _Slot) -> None:
        """The reply as OpenAI and llama.cpp stream it: server-sent `data:` events of
        `chat.completion.chunk`s (the role first, then a token each, then the finish reason), the
        usage in a last chunk without choices when `stream_options.include_usage` is set, then
        `data: [DONE]`. The headers go out when the reply starts (llama.cpp: when a slot takes
        it), the first token after `delay`."""
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        whole = self._completion(request, reply, number)
        head = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"],
                "model": whole["model"], "system_fingerprint": None}

        def chunk(delta: dict, logprobs: Any = None, finish: str | None = None) -> str:
            return json.dumps({**head, "choices": [{"index": 0, "delta": delta, "logprobs": logprobs,
                                                    "finish_reason": finish}], **({"usage": None} if usage else {})})

        handler.start_stream()
        if fault == "invalid_json":
            handler.send_event('<html><body>upstream said: {"id": "chatcmpl-</body></html>')
            handler.end_stream()
            return
        if not self._generate(handler, reply.delay):
            return
        tokens = reply.tokens()
        logprobs = (whole["choices"][0]["logprobs"] or {}).get("content") or []
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": token}, {"content": logprobs[n:n + 1]} if logprobs else None)
                   for n, token in enumerate(tokens)]
        events.append(chunk({}, finish=reply.finish_reason))
        if usage:
            events.append(json.dumps({**head, "choices": [], "usage": whole["usage"]}))
        events.append("[DONE]")
        for n, event in enumerate(events):
            if fault == "truncated" and n == len(events) // 2:
                handler.close_connection = True  # the connection ends inside the chunked body
                return
            if 0 < n <= len(tokens) and not self._generate(handler, reply.pace):
                return
            if n == len(tokens) + 1:
                slot.release()  # the last token is out: the finish reason and usage need no slot
            try:
                handler.send_event(event)
            except OSError:
                self._gone()
                return
        handler.end_stream()

    def _take_slot(self, handler: _Handler) -> _Slot | None:
        """A slot for one reply (at once when there are no slots); None when the request gets a
        503 for a busy slot (queue=False), or the server closes or the client leaves while it
        waits in the queue."""
        if self._free_slots is not None and not self.queue and not self._free_slots.acquire(blocking=False):
            with self._lock:
                self.refused_busy += 1
            handler.send_json(503, error_body("no slot available", "unavailable_error", code="unavailable"))
            return None
        if self._free_slots is not None and self.queue and not self._free_slots.acquire(blocking=False):
            with self._lock:
                self.queued += 1
                self.max_queued = max(self.max_queued, self.queued)
            try:
                while not self._free_slots.acquire(timeout=0.02):
                    if self._closing.is_set():
                        return None
                    if _client_gone(handler.connection):
                        self._gone()
                        return None
            finally:
                with self._lock:
                    self.queued -= 1
        with self._lock:
            self.generating += 1
            self.max_generating = max(self.max_generating, self.generating)
        return _Slot(self)

    def _generate(self, handler: _Handler, seconds: float) -> bool:
        """Spend `seconds` generating, stopping early (False) when the client leaves, as llama.cpp
        cancels a task whose connection closed, or when the server closes."""
        deadline = time.monotonic() + seconds
        while True:
            if self._closing.is_set():
                handler.reset()
                return False
            if _client_gone(handler.connection):
                self._gone()
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self._closing.wait(min(left, 0.02))

    def _gone(self) -> None:
        with self._lock:
            self.abandoned += 1

    def _refusal(self, request: dict) -> dict | None:
        """The 400 body OpenAI would send for this chat request, or None when it takes it."""
        response_format = request.get("response_format")
        if (not self.json_schema and isinstance(response_format, dict)
                and response_format.get("type") == "json_schema"):
            return error_body("response_format json_schema is not supported", "invalid_request_error",
                              param="response_format")
        if request.get("logprobs") and not self.logprobs:
            return error_body("logprobs is not supported by this server", "invalid_request_error", param="logprobs")
        refused = self._refused_format(response_format)
        if refused:
            return error_body(refused, "invalid_request_error", param="response_format")
        if request.get("stream_options") is not None and not request.get("stream"):
            return error_body("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                              "invalid_request_error", param="stream_options")
        return None

    def _reply_to(self, request: dict, empty: bool = False) -> Reply | dict:
        """The test's reply to a chat request, or the 500 body when its reply callable raised."""
        try:
            reply = Reply("") if empty else self.reply(request)
            if isinstance(reply, str):
                reply = Reply(reply)
            if not isinstance(reply, Reply):
                raise TypeError(f"reply returned {type(reply).__name__}, not str or Reply")
        except Exception as exc:  # a bug in the test's reply callable: visible, not a hang
            with self._lock:
                self.errors.append(exc)
            return error_body(f"reply callable raised {exc!r}", "server_error")
        return reply

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


# --- the Files and Batch APIs ----------------------------------------------------------------

BATCH_ENDPOINTS = frozenset({"/v1/chat/completions"})
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
METADATA_KEYS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512


@dataclass
class StoredFile:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int

    def json(self) -> dict:
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed"}


@dataclass
class ScriptedBatch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict | None
    created_at: int
    lines: list[dict]
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict] | None = None
    completed: int = 0
    failed: int = 0
    times: dict[str, int] | None = None

    def json(self) -> dict:
        times = self.times or {}
        return {
            "id": self.id, "object": "batch", "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id, "completion_window": self.completion_window,
            "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
            "created_at": self.created_at, "expires_at": self.created_at + 86400,
            **{f"{step}_at": times.get(step) for step in
               ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")},
            "request_counts": {"total": len(self.lines), "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
        }


class BatchService:
    """OpenAI's Files and Batch APIs, as the ``openai`` client calls them, on the scripted server.

    * ``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/ID``,
      ``GET /v1/files/ID/content``.
    * ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window``, ``metadata``),
      ``GET /v1/batches/ID``, ``GET /v1/batches`` (newest first, ``limit`` and ``after``),
      ``POST /v1/batches/ID/cancel``.

    Held to what OpenAI enforces: the input file must have purpose ``batch``; the endpoint must
    be ``/v1/chat/completions`` and the window ``24h`` (else a 400); metadata has at most 16 keys
    of 64 characters and values of 512 (else a 400); every line must be a JSON object with a
    unique ``custom_id``, ``method`` POST and the batch's endpoint as ``url`` (else the batch
    fails validation, status ``failed`` with one error per line). A line's body is answered as a
    chat request is (the reply callable, the same refusals) when the batch runs, and recorded in
    this service's ``requests`` (the chat endpoint's own are the server's ``requests``).

    A batch stays ``validating`` until the test moves it: ``advance(status, ...)`` moves every
    unfinished batch to ``in_progress``, ``completed`` (its lines answered; the first ``failing``
    of them get a 500 in the error file: a partial failure), ``expired`` (the first ``answered``
    lines answered, the others in the error file as ``batch_expired``) or ``failed`` (rejected,
    nothing run). With ``steps`` set (a list of statuses), every retrieve of a batch moves it to
    the next one, as a real batch goes on while a client polls.
    """

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.requests: list[dict] = []  # every batch line's body run, in order (the chat endpoint's: server.requests)
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, ScriptedBatch] = {}
        self.steps: list[str] | None = None
        self.retrieves = 0
        self._ids = 0

    # --- what a test controls -----------------------------------------------------------------

    def advance(self, status: str, *, failing: int = 0, answered: int | None = None) -> list[str]:
        """Move every unfinished batch to `status`; the ids moved."""
        with self.server._lock:
            moving = [b for b in self.batches.values() if b.status in UNFINISHED]
        for batch in moving:
            self._move(batch, status, failing=failing, answered=answered)
        return [b.id for b in moving]

    @property
    def unfinished(self) -> list[ScriptedBatch]:
        return [b for b in self.batches.values() if b.status in UNFINISHED]

    # --- internals ----------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        with self.server._lock:
            self._ids += 1
            return f"{prefix}-{self._ids:04d}"

    def _store(self, purpose: str, filename: str, data: bytes) -> StoredFile:
        stored = StoredFile(self._next_id("file"), purpose, filename, data, int(time.time()))
        self.files[stored.id] = stored
        return stored

    def _move(self, batch: ScriptedBatch, status: str, *, failing: int = 0, answered: int | None = None) -> None:
        now = int(time.time())
        batch.times = {**(batch.times or {}), status: now}
        if status in ("in_progress", "finalizing", "cancelling", "validating"):
            batch.status = status
            return
        if status == "failed":
            batch.errors = [{"code": "scripted_failure", "message": "the batch failed (scripted)", "param": None,
                             "line": None}]
            batch.status = "failed"
            return
        if status not in ("completed", "expired", "cancelled"):
            raise ValueError(f"unknown batch status {status!r}")
        outputs, errors = [], []
        for n, line in enumerate(batch.lines):
            run = status == "completed" or (answered is not None and n < answered)
            if not run:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                errors.append({"id": f"batch_req_{batch.id}_{n}", "custom_id": line["custom_id"], "response": None,
                               "error": {"code": code, "message": f"This request could not be executed before the "
                                                                  f"batch was {status}."}})
                continue
            code, body = (500, error_body("The server had an error while processing your request (scripted)",
                                          "server_error")) if n < failing else self._run(line["body"])
            (outputs if code == 200 else errors).append({
                "id": f"batch_req_{batch.id}_{n}", "custom_id": line["custom_id"],
                "response": {"status_code": code, "request_id": f"req_{batch.id}_{n}", "body": body}, "error": None})
        if outputs:
            batch.output_file_id = self._store("batch_output", f"{batch.id}_output.jsonl", _jsonl(outputs)).id
        if errors:
            batch.error_file_id = self._store("batch_output", f"{batch.id}_error.jsonl", _jsonl(errors)).id
        batch.completed, batch.failed = len(outputs), len(errors)
        batch.status = status

    def _run(self, body: dict) -> tuple[int, dict]:
        """A batch line's body answered as the chat endpoint answers it (status, response body)."""
        server = self.server
        with server._lock:
            self.requests.append(body)
            number = len(self.requests)
        refusal = server._refusal(body)
        if refusal is not None:
            return 400, refusal
        reply = server._reply_to(body)
        if not isinstance(reply, Reply):
            return 500, reply
        return 200, server._completion(body, reply, number)

    def handle(self, handler: _Handler, method: str, raw: bytes) -> bool:
        """Answer a Files or Batch API request; False when the path is neither."""
        path, _, query = handler.path.partition("?")
        parts = path.rstrip("/").split("/")[1:]  # ["v1", "files", ...]
        if len(parts) < 2 or parts[0] != "v1" or parts[1] not in ("files", "batches"):
            return False
        try:
            status, body = self._route(method, parts[1:], dict(p.split("=", 1) for p in query.split("&") if "=" in p),
                                       raw, handler.headers.get("Content-Type", ""))
        except Exception as exc:  # a bug here: visible to the test, not a hang
            with self.server._lock:
                self.server.errors.append(exc)
            status, body = 500, error_body(f"batch service raised {exc!r}", "server_error")
        if isinstance(body, bytes):
            handler.send_bytes(status, body)
        else:
            handler.send_json(status, body)
        return True

    def _route(self, method: str, parts: list[str], query: dict[str, str], raw: bytes,
               content_type: str) -> tuple[int, dict | bytes]:
        kind, rest = parts[0], parts[1:]
        if kind == "files" and method == "POST" and not rest:
            return self._upload(raw, content_type)
        if kind == "files" and method == "GET" and rest:
            stored = self.files.get(rest[0])
            if stored is None:
                return 404, error_body(f"No such File object: {rest[0]}", "invalid_request_error", param="id")
            return (200, stored.data) if rest[1:] == ["content"] else (200, stored.json())
        if kind == "batches" and method == "POST" and not rest:
            return self._create(raw)
        if kind == "batches" and method == "GET" and not rest:
            return 200, self._list(query)
        if kind == "batches" and rest:
            batch = self.batches.get(rest[0])
            if batch is None:
                return 404, error_body(f"No batch found with id '{rest[0]}'.", "invalid_request_error", param="id")
            if method == "POST" and rest[1:] == ["cancel"]:
                if batch.status in UNFINISHED:
                    self._move(batch, "cancelling")
                    self._move(batch, "cancelled", answered=0)
                return 200, batch.json()
            if method == "GET" and not rest[1:]:
                self.retrieves += 1
                if self.steps and batch.status in UNFINISHED:
                    step = self.steps[min(self.steps.index(batch.status) + 1, len(self.steps) - 1)] \
                        if batch.status in self.steps else self.steps[0]
                    self._move(batch, step)
                return 200, batch.json()
        return 404, error_body(f"Unknown request URL: {method} /v1/{'/'.join(parts)}", "invalid_request_error",
                               code="unknown_url")

    def _upload(self, raw: bytes, content_type: str) -> tuple[int, dict]:
        from email.parser import BytesParser
        from email.policy import HTTP

        message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts() if message.is_multipart() else ():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields or "purpose" not in fields:
            return 400, error_body("a file upload needs the fields 'file' and 'purpose'", "invalid_request_error")
        purpose = fields["purpose"][1].decode()
        if purpose not in ("batch", "fine-tune", "assistants", "vision", "user_data", "evals"):
            return 400, error_body(f"'{purpose}' is not one of the supported purposes", "invalid_request_error",
                                   param="purpose")
        return 200, self._store(purpose, fields["file"][0] or "upload", fields["file"][1]).json()

    def _create(self, raw: bytes) -> tuple[int, dict]:
        try:
            request = json.loads(raw)
        except ValueError as exc:
            return 400, error_body(f"the body is not JSON: {exc}", "invalid_request_error")
        stored = self.files.get(str(request.get("input_file_id")))
        if stored is None:
            return 400, error_body(f"No such File object: {request.get('input_file_id')}", "invalid_request_error",
                                   param="input_file_id")
        if stored.purpose != "batch":
            return 400, error_body("The input file must have purpose 'batch'", "invalid_request_error",
                                   param="input_file_id")
        if request.get("endpoint") not in BATCH_ENDPOINTS:
            return 400, error_body(f"Invalid endpoint {request.get('endpoint')!r}", "invalid_request_error",
                                   param="endpoint")
        if request.get("completion_window") != "24h":
            return 400, error_body("completion_window must be '24h'", "invalid_request_error",
                                   param="completion_window")
        metadata = request.get("metadata")
        if metadata is not None and (len(metadata) > METADATA_KEYS or any(
                len(k) > METADATA_KEY_CHARS or not isinstance(v, str) or len(v) > METADATA_VALUE_CHARS
                for k, v in metadata.items())):
            return 400, error_body("metadata: at most 16 keys of 64 characters, string values of 512",
                                   "invalid_request_error", param="metadata")
        lines, errors, seen = [], [], set()
        for number, text in enumerate(stored.data.decode().splitlines(), start=1):
            try:
                line = json.loads(text)
            except ValueError:
                errors.append({"code": "invalid_json_line", "message": "This line is not valid JSON.", "line": number})
                continue
            if not isinstance(line, dict) or not line.get("custom_id") or line["custom_id"] in seen:
                errors.append({"code": "duplicate_custom_id", "message": "custom_id is missing or repeated.",
                               "line": number})
            elif line.get("method") != "POST" or line.get("url") != request["endpoint"] \
                    or not isinstance(line.get("body"), dict):
                errors.append({"code": "invalid_request", "message": "method, url or body is invalid.", "line": number})
            else:
                seen.add(line["custom_id"])
                lines.append(line)
        batch = ScriptedBatch(self._next_id("batch"), stored.id, request["endpoint"], "24h", metadata,
                              int(time.time()), lines)
        if errors or not lines:
            batch.status, batch.errors = "failed", [{**e, "param": None} for e in errors] or [
                {"code": "empty_file", "message": "The input file has no requests.", "param": None, "line": None}]
        self.batches[batch.id] = batch
        return 200, batch.json()

    def _list(self, query: dict[str, str]) -> dict:
        newest = sorted(self.batches.values(), key=lambda b: b.id, reverse=True)
        if "after" in query:
            newest = [b for b in newest if b.id < query["after"]]
        limit = int(query.get("limit", 20))
        page = newest[:limit]
        return {"object": "list", "data": [b.json() for b in page], "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None, "has_more": len(newest) > limit}


def _jsonl(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)
