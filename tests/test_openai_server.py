"""The scripted OpenAI server works with the real `openai` client, over real sockets."""
from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

from openai_server import Fault, Reply, ScriptedServer

MESSAGES = [
    {"role": "system", "content": "You answer in JSON."},
    {"role": "user", "content": "hello there"},
]


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


def sync_client(server: ScriptedServer, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test", **kwargs)


def async_client(server: ScriptedServer, **kwargs) -> openai.AsyncOpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", **kwargs)


def ask(client: openai.OpenAI, **kwargs):
    return client.chat.completions.create(model=kwargs.pop("model", "gpt-test"), messages=MESSAGES, **kwargs)


def test_default_reply_echoes_the_last_user_message_as_json(server):
    with sync_client(server) as client:
        response = ask(client)
    assert response.id == "chatcmpl-1"
    assert response.object == "chat.completion"
    assert response.model == "gpt-test"
    assert isinstance(response.created, int)
    choice = response.choices[0]
    assert choice.message.role == "assistant"
    assert json.loads(choice.message.content) == {"echo": "hello there"}
    assert choice.finish_reason == "stop"
    assert choice.logprobs is None
    # Default counts: words in all messages (4 + 2), words in the content ('{"echo":', '"hello', 'there"}').
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (6, 3, 9)
    assert server.requests == [{"model": "gpt-test", "messages": MESSAGES}]
    assert server.errors == []


def test_scripted_reply_sets_content_usage_and_finish_reason():
    seen = []

    def reply(request):
        seen.append(request["messages"][-1]["content"])
        return Reply("three little words", prompt_tokens=7, finish_reason="length")

    with ScriptedServer(reply, model="served") as server, sync_client(server) as client:
        response = client.chat.completions.create(model="", messages=MESSAGES)
        assert response.choices[0].message.content == "three little words"
        assert response.choices[0].finish_reason == "length"
        assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (7, 3)
        assert response.usage.total_tokens == 10
        assert response.model == "served"  # no model in the request: the server's
        assert [m.id for m in client.models.list()] == ["served"]
        assert seen == ["hello there"]


def test_a_plain_string_reply_and_a_failing_reply_callable():
    replies = iter(["plain"])

    with ScriptedServer(lambda request: next(replies)) as server, sync_client(server) as client:
        assert ask(client).choices[0].message.content == "plain"
        with pytest.raises(openai.InternalServerError, match="StopIteration"):
            ask(client)
        assert [type(e) for e in server.errors] == [StopIteration]


def test_logprobs_come_back_in_the_openai_format():
    logprobs = [("Hel", -0.25, {"Hel": -0.25, "Hi": -1.5}), ("lo", -0.01, {"lo": -0.01, "p": -4.0})]
    with ScriptedServer(lambda request: Reply("Hello", logprobs=logprobs)) as server, sync_client(server) as client:
        response = ask(client, logprobs=True, top_logprobs=2)
    content = response.choices[0].logprobs.content
    assert [(t.token, t.logprob, t.bytes) for t in content] == [("Hel", -0.25, [72, 101, 108]), ("lo", -0.01, [108, 111])]
    assert [(t.token, t.logprob) for t in content[0].top_logprobs] == [("Hel", -0.25), ("Hi", -1.5)]
    assert content[1].top_logprobs[1].bytes == [112]
    assert server.requests[0]["logprobs"] is True and server.requests[0]["top_logprobs"] == 2


JSON_SCHEMA = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}},
}


def test_a_server_without_structured_outputs_refuses_json_schema_only():
    with ScriptedServer(json_schema=False) as server, sync_client(server) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            ask(client, response_format=JSON_SCHEMA)
        assert caught.value.status_code == 400
        assert caught.value.body == {
            "message": "response_format json_schema is not supported",
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
        assert ask(client, response_format={"type": "json_object"}).choices[0].message.content
        assert ask(client).choices[0].message.content
        assert len(server.requests) == 3


def test_a_server_with_structured_outputs_answers_json_schema(server):
    with sync_client(server) as client:
        response = ask(client, response_format=JSON_SCHEMA)
    assert json.loads(response.choices[0].message.content) == {"echo": "hello there"}
    assert server.requests[0]["response_format"] == JSON_SCHEMA


# What the client raises for each fault when it does not retry (max_retries=0). invalid_json is
# not an openai exception at all: the JSON decoder's error escapes from create().
FAULTS = [
    (Fault("429", retry_after=2), openai.RateLimitError),
    (Fault("500"), openai.InternalServerError),
    (Fault("502"), openai.InternalServerError),
    (Fault("503"), openai.InternalServerError),
    (Fault("reset"), openai.APIConnectionError),
    (Fault("timeout", delay=1.0), openai.APITimeoutError),
    (Fault("truncated"), openai.APIConnectionError),
    (Fault("invalid_json"), json.JSONDecodeError),
]


@pytest.mark.parametrize("fault, error", FAULTS, ids=[f.kind for f, _ in FAULTS])
def test_each_fault_is_the_right_client_exception(server, fault, error, capfd):
    with sync_client(server, timeout=0.5) as client:
        ask(client)  # a kept-alive connection first: faults must work on a reused one too
        server.fail_next(fault)
        with pytest.raises(error) as caught:
            ask(client)
        assert type(caught.value) is error or (error is openai.InternalServerError)
        response = ask(client)  # normal replies resume
    assert response.choices[0].message.content
    assert len(server.requests) == 3 and server.pending_faults == 0
    if fault.kind in {"429", "500", "502", "503"}:
        assert caught.value.status_code == int(fault.kind)
        assert isinstance(caught.value, openai.APIStatusError)
        assert caught.value.body["type"] in {"requests", "server_error"}
    if fault.kind == "429":
        assert caught.value.response.headers["retry-after"] == "2"
    if fault.kind == "invalid_json":
        assert not isinstance(caught.value, openai.OpenAIError)
    assert capfd.readouterr().err == ""  # quiet, even when the client has gone away


@pytest.mark.parametrize("fault, error", FAULTS, ids=[f.kind for f, _ in FAULTS])
def test_each_fault_is_the_right_exception_for_the_async_client(server, fault, error):
    async def main():
        async with async_client(server, timeout=0.5) as client:
            with pytest.raises(error):
                await client.chat.completions.create(model="m", messages=MESSAGES)

    server.fail_next(fault)  # on a fresh connection this time
    asyncio.run(main())
    assert len(server.requests) == 1


def test_the_empty_fault_is_an_empty_reply_not_an_error(server):
    server.fail_next("empty")
    with sync_client(server) as client:
        response = ask(client)
    assert response.choices[0].message.content == ""
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens == 0


def test_fail_next_is_consumed_in_order_then_replies_resume(server):
    server.fail_next(Fault("503"), Fault("429"))
    server.fail_next("reset")  # calls add to the queue
    with sync_client(server) as client:
        for error in (openai.InternalServerError, openai.RateLimitError, openai.APIConnectionError):
            with pytest.raises(error):
                ask(client)
        assert ask(client).id == "chatcmpl-4"
    assert len(server.requests) == 4


def test_the_client_retries_after_the_servers_retry_after(server):
    server.fail_next(Fault("429", retry_after=0.05), Fault("429", retry_after=0.05))
    start = time.monotonic()
    with sync_client(server, max_retries=2) as client:
        response = ask(client)
    assert time.monotonic() - start < 1  # it waited Retry-After, not its own 0.5 s+ backoff
    assert response.id == "chatcmpl-3" and len(server.requests) == 3


def test_max_in_flight_counts_concurrent_requests():
    async def main(server):
        async with async_client(server) as client:
            return await asyncio.gather(*(
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                for i in range(3)
            ))

    with ScriptedServer(lambda request: Reply("slow", delay=0.3)) as server:
        start = time.monotonic()
        responses = asyncio.run(main(server))
        assert time.monotonic() - start < 0.85  # concurrent, not 3 x 0.3 s
        assert server.max_in_flight == 3
        assert sorted(r.id for r in responses) == ["chatcmpl-1", "chatcmpl-2", "chatcmpl-3"]
        assert sorted(r["messages"][0]["content"] for r in server.requests) == ["q0", "q1", "q2"]
        assert server.in_flight == 0


def test_close_does_not_wait_for_a_sleeping_request():
    server = ScriptedServer(lambda request: Reply("never", delay=30))
    outcome = []

    def call():
        with sync_client(server, timeout=10) as client:
            try:
                ask(client)
            except openai.APIConnectionError as exc:
                outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while server.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.in_flight == 1
    start = time.monotonic()
    server.close()
    assert time.monotonic() - start < 1
    thread.join(5)
    assert [type(e) for e in outcome] == [openai.APIConnectionError]
    server.close()  # idempotent


def test_unknown_fault_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("418")  # type: ignore[arg-type]


def batch_file(client: openai.OpenAI, *questions: str, url: str = "/v1/chat/completions"):
    lines = "".join(json.dumps({"custom_id": f"q{n}", "method": "POST", "url": url,
                                "body": {"model": "m", "messages": [{"role": "user", "content": q}]}}) + "\n"
                    for n, q in enumerate(questions))
    return client.files.create(file=("in.jsonl", lines.encode()), purpose="batch")


def lines_of(client: openai.OpenAI, file_id: str | None) -> list[dict]:
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()] if file_id else []


def test_a_batch_goes_through_the_states_the_test_moves_it_to(server):
    with sync_client(server) as client:
        upload = batch_file(client, "one", "two", "three")
        assert upload.purpose == "batch" and client.files.retrieve(upload.id).bytes == upload.bytes
        batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                      completion_window="24h", metadata={"created_by": "test"})
        assert batch.status == "validating" and batch.metadata == {"created_by": "test"}
        assert batch.request_counts.total == 3
        server.batch_service.advance("in_progress")
        assert client.batches.retrieve(batch.id).status == "in_progress"
        assert server.requests == [] and server.batch_service.requests == []  # nothing ran yet
        server.batch_service.advance("completed", failing=1)  # a partial failure
        done = client.batches.retrieve(batch.id)
        assert done.status == "completed" and (done.request_counts.completed, done.request_counts.failed) == (2, 1)
        answers = lines_of(client, done.output_file_id)
        assert [(a["custom_id"], a["response"]["status_code"]) for a in answers] == [("q1", 200), ("q2", 200)]
        assert json.loads(answers[0]["response"]["body"]["choices"][0]["message"]["content"]) == {"echo": "two"}
        errors = lines_of(client, done.error_file_id)
        assert [(e["custom_id"], e["response"]["status_code"]) for e in errors] == [("q0", 500)]
        assert len(server.batch_service.requests) == 2 and server.requests == []

        expiring = client.batches.create(input_file_id=batch_file(client, "a", "b").id,
                                         endpoint="/v1/chat/completions", completion_window="24h")
        server.batch_service.advance("expired", answered=1)
        expired = client.batches.retrieve(expiring.id)
        assert expired.status == "expired" and [a["custom_id"] for a in lines_of(client, expired.output_file_id)] == ["q0"]
        assert [e["error"]["code"] for e in lines_of(client, expired.error_file_id)] == ["batch_expired"]

        failing = client.batches.create(input_file_id=batch_file(client, "x").id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
        server.batch_service.advance("failed")
        failed = client.batches.retrieve(failing.id)
        assert failed.status == "failed" and failed.errors.data[0].code == "scripted_failure"
        assert failed.output_file_id is None

        cancelling = client.batches.create(input_file_id=batch_file(client, "y").id, endpoint="/v1/chat/completions",
                                           completion_window="24h")
        assert client.batches.cancel(cancelling.id).status == "cancelled"
        listed = [b.id for b in client.batches.list(limit=2)]  # newest first, over pages
        assert listed == [cancelling.id, failing.id, expiring.id, batch.id]


def test_the_batch_service_refuses_what_openai_refuses(server):
    with sync_client(server) as client:
        upload = batch_file(client, "one")
        with pytest.raises(openai.BadRequestError, match="completion_window"):
            client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="1h")
        with pytest.raises(openai.BadRequestError, match="metadata"):
            client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h",
                                  metadata={"k": "v" * 513})
        wrong = client.batches.create(input_file_id=batch_file(client, "one", url="/v1/embeddings").id,
                                      endpoint="/v1/chat/completions", completion_window="24h")
        assert wrong.status == "failed" and wrong.errors.data[0].line == 1
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch-none")


def test_a_batch_moves_on_each_time_it_is_asked_about_when_told_to(server):
    server.batch_service.steps = ["validating", "in_progress", "completed"]
    with sync_client(server) as client:
        batch = client.batches.create(input_file_id=batch_file(client, "one").id, endpoint="/v1/chat/completions",
                                      completion_window="24h")
        assert [client.batches.retrieve(batch.id).status for _ in range(3)] == ["in_progress", "completed", "completed"]


# --- streaming, as OpenAI and llama.cpp send it ------------------------------------------------

def raw_events(server: ScriptedServer, body: dict) -> list[str]:
    """The `data:` payloads of a streamed reply, read off the socket (no client in between)."""
    request = urllib.request.Request(f"{server.url}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        text = response.read().decode()
    assert text.endswith("\n\n") and all(block.startswith("data: ") for block in text.split("\n\n")[:-1])
    return [block.removeprefix("data: ") for block in text.split("\n\n")[:-1]]


def test_a_streamed_reply_is_server_sent_chunks_with_the_usage_last_when_asked():
    with ScriptedServer(lambda request: Reply("three little words", prompt_tokens=7)) as server:
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        events = raw_events(server, {**body, "stream_options": {"include_usage": True}})
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]) == "three little words"
        assert len(chunks) == 1 + 3 + 1 + 1  # the role, a token each, the finish reason, the usage
        assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3,
                                                                      "total_tokens": 10}
        assert all(c["usage"] is None for c in chunks[:-1])  # as OpenAI sends it: null until the last
        plain = [json.loads(e) for e in raw_events(server, body)[:-1]]
        assert "usage" not in plain[-1] and plain[-1]["choices"][0]["finish_reason"] == "stop"  # not asked: none


def test_the_openai_client_reads_a_streamed_reply_its_logprobs_and_its_usage():
    from openai.lib.streaming.chat import ChatCompletionStreamState

    logprobs = [("Hel", -0.25, {"Hel": -0.25, "Hi": -1.5}), ("lo", -0.01, {"lo": -0.01})]
    with ScriptedServer(lambda request: Reply("Hel lo", logprobs=logprobs, finish_reason="length")) as server, \
            sync_client(server) as client:
        state = ChatCompletionStreamState()
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True, logprobs=True,
                                                    top_logprobs=2, stream_options={"include_usage": True}):
            state.handle_chunk(chunk)
        completion = state.current_completion_snapshot
    choice = completion.choices[0]
    assert choice.message.content == "Hel lo" and choice.finish_reason == "length"
    assert [(t.token, t.logprob) for t in choice.logprobs.content] == [("Hel", -0.25), ("lo", -0.01)]
    assert [t.token for t in choice.logprobs.content[0].top_logprobs] == ["Hel", "Hi"]
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (6, 2)


def test_stream_options_without_stream_is_refused_as_openai_refuses_it(server):
    with sync_client(server) as client, pytest.raises(openai.BadRequestError, match="only allowed when 'stream'"):
        ask(client, stream_options={"include_usage": True})


def test_a_streamed_reply_comes_a_token_at_a_time_while_the_server_generates():
    with ScriptedServer(lambda request: Reply("one two three four five six", pace=0.2)) as server, \
            sync_client(server) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        contents = [c.choices[0].delta.content for c in itertools.islice(stream, 2)]
        assert contents == ["", "one"] and server.generating == 1  # the first token, before the last is made
        stream.close()
        deadline = time.monotonic() + 5
        while server.abandoned == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.abandoned == 1 and server.generating == 0  # the client left: generation stopped


STREAM_FAULTS = [
    (Fault("timeout", delay=1.0), openai.APITimeoutError),
    (Fault("truncated"), openai.APIConnectionError),
    (Fault("invalid_json"), json.JSONDecodeError),
]


@pytest.mark.parametrize("fault, error", STREAM_FAULTS, ids=[f.kind for f, _ in STREAM_FAULTS])
def test_each_fault_of_a_stream_is_the_right_client_exception(server, fault, error):
    server.fail_next(fault)
    with sync_client(server, timeout=0.5) as client, pytest.raises(error):
        for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            pass
    assert len(server.requests) == 1


# --- slots, as llama.cpp serves them -----------------------------------------------------------

def test_a_server_with_slots_serves_that_many_at_once_and_queues_the_rest_silently():
    async def one(client: openai.AsyncOpenAI, events: list[str]) -> str:
        async with await client.chat.completions.create(model="m", messages=MESSAGES, stream=True) as stream:
            events.append("status")  # the status line came: a slot took it
            reply = ""
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content and not reply:
                    events.append("token")
                reply += chunk.choices[0].delta.content or "" if chunk.choices else ""
        return reply

    async def main() -> tuple[list[str], list[str]]:
        async with async_client(server) as client:
            events: list[str] = []
            return await asyncio.gather(*(one(client, events) for _ in range(3))), events

    with ScriptedServer(lambda request: Reply("a b c d", pace=0.2), slots=2) as server:
        replies, events = asyncio.run(main())
        assert replies == ["a b c d"] * 3
        assert server.max_generating == 2 and server.max_queued == 1 and server.abandoned == 0
        # the third heard nothing, not even its status line, while the first two generated
        assert events[:2] == ["status", "status"] and events.index("token") < events.index("status", 2)


def test_props_reports_the_slots_as_llama_cpp_does_and_others_have_none():
    def props(server: ScriptedServer) -> int | None:
        try:
            with urllib.request.urlopen(f"{server.url}/props", timeout=5) as response:
                return json.load(response)["total_slots"]
        except urllib.error.HTTPError as exc:
            return exc.code

    with ScriptedServer(slots=3) as llama, ScriptedServer(slots=3, report_slots=False) as ollama, \
            ScriptedServer() as plain:
        assert (props(llama), props(ollama), props(plain)) == (3, 404, 404)


def test_a_server_without_a_queue_refuses_a_request_for_a_busy_slot_with_503():
    with ScriptedServer(lambda request: Reply("a b c", pace=0.2), slots=1, queue=False) as server, \
            sync_client(server) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        next(iter(stream))
        with pytest.raises(openai.InternalServerError, match="no slot available") as caught:
            ask(client)
        assert caught.value.status_code == 503 and server.refused_busy == 1
        assert "".join(c.choices[0].delta.content or "" for c in stream) == "a b c"
        assert ask(client).choices[0].message.content == "a b c"  # the slot is free again
