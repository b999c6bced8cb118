"""`kbuild build --batch`: a build's model calls go through the server's batch service (OpenAI's
Batch API, here the scripted server's), a later build collects them, and nothing is paid twice."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from conftest import kbuild
from documents import scripted_kbuildfile
from model_replies import faithful_reply
from openai_server import ScriptedServer

DOCS = {
    "payments.md": "# Payments\n\nA single payment MUST NOT exceed 10,000 EUR.\n\n## Refunds\n\n"
                   "Refunds MUST be requested within 90 days of the payment. A refund returns the whole amount.\n",
    "shipping.md": "# Shipping\n\nParcels leave the warehouse within two working days.\n\n## Returns\n\n"
                   "A parcel may be returned within 30 days.\n",
}
WAITING = 4


def store(root: Path, url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Kbuildfile.py").write_text(scripted_kbuildfile(url))
    for name, text in DOCS.items():
        (root / name).write_text(text)
    (root / "kb/shop").mkdir(parents=True)
    (root / "kb/shop/sources.yml").write_text("sources:\n" + "".join(
        f"  - id: {name[:-3]}\n    path: {name}\n" for name in DOCS))
    return root


def run(root: Path, *args: str) -> tuple[int, str]:
    """kbuild as a user runs it: a process of its own."""
    done = subprocess.run([sys.executable, "-m", "kbuild", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=240)
    return done.returncode, done.stdout + done.stderr


def pages(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted((root / "kb").rglob("*"))
            if p.is_file() and p.suffix in (".md", ".yml", ".json")}


def submitted(output: str) -> tuple[int, str] | None:
    found = re.search(r"submitted (\d+) calls as batch (\S+),", output)
    return (int(found.group(1)), found.group(2)) if found else None


@pytest.fixture
def server():
    with ScriptedServer(faithful_reply, string_bounds=True) as s:
        yield s


@pytest.fixture(scope="module")
def online(tmp_path_factory) -> tuple[dict[str, str], int]:
    """The store built online, and how many requests that took."""
    with ScriptedServer(faithful_reply, string_bounds=True) as server:
        root = store(tmp_path_factory.mktemp("online"), server.url)
        code, output = run(root)
        assert code == 0, output
        return pages(root), len(server.requests)


@pytest.mark.slow
def test_a_cold_build_in_batch_mode_goes_layer_by_layer_and_ends_as_an_online_build(tmp_path, server, online):
    root = store(tmp_path, server.url)
    code, output = run(root, "build", "--batch")
    assert code == WAITING, output
    first = submitted(output)
    assert first is not None and first[0] > 0, output
    assert "waiting" in output and "0 failed" in output
    assert server.requests == []  # not one online call
    assert [b.id for b in server.batch_service.batches.values()] == [first[1]]
    assert (root / f".kbuild/batches/{first[1]}.json").exists()  # its id kept in .kbuild/

    code, output = run(root, "build", "--batch")  # still validating: nothing new is submitted
    assert code == WAITING and submitted(output) is None and "still running" in output, output
    assert len(server.batch_service.batches) == 1

    layers = 1
    while True:
        server.batch_service.advance("completed")
        code, output = run(root, "build", "--batch")
        assert f"collected batch" in output, output
        if code == 0:
            break
        assert code == WAITING and submitted(output) is not None, output
        layers += 1
        assert layers < 10
    assert layers >= 2  # a summary needs its facts first
    assert server.requests == []
    assert pages(root) == online[0]
    ran = server.batch_service.requests
    assert len(ran) == online[1]  # every request once: none paid twice
    assert len({json.dumps(r, sort_keys=True) for r in ran}) == len(ran)
    code, output = run(root, "build", "--batch")
    assert code == 0 and "0 calls" in output, output
    (root / ".kbuild/uptodate.json").unlink(missing_ok=True)
    code, output = run(root, "build", "--no-fetch")  # online now: everything is in the call cache
    assert code == 0 and server.requests == [] and len(server.batch_service.batches) == layers, output


@pytest.mark.slow
def test_failed_and_expired_requests_are_asked_again_and_answered_ones_never(tmp_path, server, online):
    root = store(tmp_path, server.url)
    code, output = run(root, "build", "--batch")
    assert code == WAITING, output
    calls, first = submitted(output)
    server.batch_service.advance("completed", failing=2)  # a partial failure: 2 requests get a 500
    code, output = run(root, "build", "--batch")
    assert code == WAITING and f"{calls - 2} answered, 2 to ask again in a new batch" in output, output
    retried = submitted(output)
    assert retried is not None
    server.batch_service.advance("expired", answered=0)  # the window passed before it ran
    code, output = run(root, "build", "--batch")
    assert code == WAITING and "(expired): 0 answered" in output, output
    server.batch_service.advance("failed")  # the service rejected the batch outright
    code, output = run(root, "build", "--batch")
    assert code == WAITING and "failed (the batch failed (scripted))" in output, output
    for _ in range(10):
        server.batch_service.advance("completed")
        code, output = run(root, "build", "--batch")
        if code == 0:
            break
        assert code == WAITING, output
    assert code == 0, output
    assert pages(root) == online[0]
    answered = [line["custom_id"] for b in server.batch_service.batches.values() if b.output_file_id
                for line in map(json.loads, server.batch_service.files[b.output_file_id].data.splitlines())]
    assert len(answered) == len(set(answered)) == online[1]  # each answer paid for once


def test_a_batch_whose_id_was_lost_is_found_by_its_metadata(tmp_path, server):
    root = store(tmp_path, server.url)
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="t", max_retries=0)
    other = client.files.create(file=("x.jsonl", b'{"custom_id": "x", "method": "POST", "url": "/v1/chat/completions",'
                                                 b' "body": {"model": "m", "messages": []}}\n'), purpose="batch")
    client.batches.create(input_file_id=other.id, endpoint="/v1/chat/completions", completion_window="24h",
                          metadata={"created_by": "kbuild", "kbuild_store": "another machine:/elsewhere"})
    code, output = run(root, "build", "--batch")
    assert code == WAITING, output
    calls, batch_id = submitted(output)
    for record in (root / ".kbuild/batches").glob("*.json"):
        record.unlink()  # as if kbuild died between batches.create and recording the id
    code, output = run(root, "build", "--batch")
    assert code == WAITING and submitted(output) is None and batch_id in output, output
    assert (root / f".kbuild/batches/{batch_id}.json").exists()
    assert len(server.batch_service.batches) == 2  # nothing submitted twice; the other store's left alone
    server.batch_service.advance("completed")
    code, output = run(root, "build", "--batch")
    assert f"collected batch {batch_id}" in output and "collected batch batch-0002" not in output, output


def test_wait_polls_with_progress_until_the_store_is_built(tmp_path, server, online):
    root = store(tmp_path, server.url)
    server.batch_service.steps = ["validating", "in_progress", "completed"]  # each poll moves a batch on
    code, output = run(root, "build", "--batch", "--wait", "--poll", "0")
    assert code == 0, output
    assert re.search(r"waiting for 1 batch: 0 of \d+ calls done \(in_progress\)", output), output
    assert re.search(r"waiting for 1 batch: (\d+) of \1 calls done \(completed\)", output), output
    assert pages(root) == online[0] and server.requests == []


def test_batch_mode_needs_a_model_server_and_wait_needs_batch_mode(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    result = kbuild(tmp_path, "build", "--batch")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--batch needs a model server: set OPENAI_API_KEY" in result.output
    result = kbuild(tmp_path, "build", "--wait")
    assert result.exit_code == 2 and "use it with --batch" in result.output


def test_batch_mode_with_a_model_named_and_no_key_says_so_before_the_network(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KBUILD_MODEL", "gpt-4o-mini")
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    result = kbuild(tmp_path, "build", "--batch")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "needs OPENAI_API_KEY, which is not set" in result.output


@pytest.mark.slow
def test_an_unreachable_batch_service_is_one_line_and_nothing_is_lost(tmp_path):
    with ScriptedServer(faithful_reply, string_bounds=True) as server:
        root = store(tmp_path, server.url)
    code, output = run(root, "build", "--batch")  # the server is gone
    assert code == 1 and "Traceback" not in output, output
    assert "the batch service at http://127.0.0.1" in output and "run `kbuild build --batch` again" in output


def test_the_exit_codes_are_in_the_help():
    result = subprocess.run([sys.executable, "-m", "kbuild", "build", "--help"], capture_output=True, text=True)
    assert "4 (--batch) calls were submitted or are still" in " ".join(result.stdout.split())


def test_a_request_the_server_refuses_in_a_batch_fails_its_page_with_the_reason_and_is_not_asked_again(tmp_path):
    with ScriptedServer(faithful_reply, json_schema=False) as server:
        root = store(tmp_path, server.url)
        code, outputs = WAITING, []
        while code == WAITING and len(outputs) < 10:
            code, output = run(root, "build", "--batch")
            outputs.append(output)
            server.batch_service.advance("completed")
        assert code == 1 and "Traceback" not in output, outputs
        assert "the model server refused the request in its batch: response_format json_schema is not supported" \
            in outputs[1]
        asked = [line["custom_id"] for b in server.batch_service.batches.values()
                 for line in map(json.loads, server.batch_service.files[b.input_file_id].data.splitlines())]
        assert len(asked) == len(set(asked))  # a refused request is not sent again


def until_built(root: Path, server: ScriptedServer) -> tuple[int, str]:
    """`kbuild build --batch` and the batch completed, again and again until nothing waits."""
    for _ in range(10):
        code, output = run(root, "build", "--batch")
        if code != WAITING:
            return code, output
        server.batch_service.advance("completed")
    raise AssertionError(output)


@pytest.mark.slow
def test_an_edit_rebuilt_in_batch_mode_asks_the_meaning_judge_in_a_batch_too(tmp_path, server):
    root = store(tmp_path, server.url)
    assert until_built(root, server)[0] == 0
    (root / "payments.md").write_text(DOCS["payments.md"].replace("the whole amount", "the entire amount"))
    code, output = until_built(root, server)
    assert code == 0, output
    judged = [r for r in server.batch_service.requests if r.get("logprobs")]
    assert judged and judged[0]["max_tokens"] == 1  # the same-meaning question, batched
    assert server.requests == []
    assert "the entire amount" in (root / "kb/shop/facts/payments/payments.md").read_text()


def test_json_says_what_waits_and_exits_4(tmp_path, server):
    root = store(tmp_path, server.url)
    done = subprocess.run([sys.executable, "-m", "kbuild", "-C", str(root), "build", "--batch", "--json"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == WAITING, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == {} and 'reading("shop","payments","payments")' in report["waiting"]
    assert len(server.batch_service.batches) == 1
