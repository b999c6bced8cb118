"""The remote call cache (KBUILD_CACHE_URL) against a real S3 server: moto's, on 127.0.0.1."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import threading
from pathlib import Path

import boto3
import pytest
from conftest import kbuild
from moto.server import ThreadedMotoServer
from openai_server import ScriptedServer
from test_model import answer, project

from kbuild.engine.callcache import CallCache, entries
from kbuild.engine.hashing import canonical_json
from kbuild.engine import remotecache
from kbuild.engine.remotecache import RemoteCache

pytestmark = pytest.mark.slow  # a real S3 server (moto)
BUCKET = "kbuild-cache"


@pytest.fixture(scope="module")
def s3_server():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)  # port 0: a free one
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch, request):
    """A bucket of its own for each test, and the environment a user sets to reach it."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server}.items():
        monkeypatch.setenv(name, value)
    for name in ("KBUILD_CACHE_DIR", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = f"{BUCKET}-{abs(hash(request.node.name)) % 10**8}"
    client.create_bucket(Bucket=bucket)
    monkeypatch.setenv("KBUILD_CACHE_URL", f"s3://{bucket}/team/calls")
    return client, bucket


def objects(client, bucket: str) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


def sources_only(machine_a: Path, clone: Path) -> Path:
    """What a CI runner checks out with an empty disk: the sources, no lock, no pages, no .kbuild/."""
    for name in ("Kbuildfile.py", "doc.md", "kb/pay/sources.yml"):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(machine_a / name, clone / name)
    return clone


def pages(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted((root / "kb").rglob("*.md"))}


def test_a_runner_with_an_empty_disk_and_a_warm_remote_builds_with_no_model_call(tmp_path, s3):
    client, bucket = s3
    with ScriptedServer(answer, string_bounds=True) as server:
        (tmp_path / "a").mkdir()
        machine_a = project(tmp_path / "a", server)
        first = kbuild(machine_a, "build")
        assert first.exit_code == 0, first.output
        calls = len(server.requests)
        assert calls > 0 and "0 from the remote" in first.output and "warning" not in first.output
        stored = objects(client, bucket)
        local = entries(machine_a / ".kbuild/cache")
        assert len(stored) == len(local) == calls  # every computed answer is in both, under the same keys
        assert all(key.startswith("team/calls/") and key.endswith(".json") for key in stored)
        assert {k.removeprefix("team/calls/") for k in stored} == \
            {e.path.relative_to(machine_a / ".kbuild/cache").as_posix() for e in local}
        assert all(stored[f"team/calls/{e.path.relative_to(machine_a / '.kbuild/cache').as_posix()}"]
                   == e.path.read_bytes() for e in local)

        (tmp_path / "b").mkdir()
        clone = sources_only(machine_a, tmp_path / "b")
        second = kbuild(clone, "build", "--json")
        assert second.exit_code == 0, second.output
        report = json.loads(second.output[second.output.index("{"):second.output.rindex("}") + 1])
        assert len(server.requests) == calls  # not one request to the model server
        assert report["calls"] == 0 and report["cache_hits"] >= calls
        assert pages(clone) == pages(machine_a) and pages(clone)
        # what the remote answered is kept locally: the runner's next build needs no remote at all
        assert len(entries(clone / ".kbuild/cache")) == calls

        (tmp_path / "c").mkdir()
        text = kbuild(sources_only(machine_a, tmp_path / "c"), "build")
        assert text.exit_code == 0 and len(server.requests) == calls
        assert re.search(rf"\b0 calls \(\d+ cached, {calls} from the remote\)", text.output), text.output


def record(request: dict, response: object) -> bytes:
    return canonical_json({"request": request, "response": response}).encode()


def test_many_writers_of_one_key_leave_one_whole_object(s3):
    client, bucket = s3
    request = {"prompt": "the same question"}
    key = CallCache.key(request)
    # each writer has its own answer, large enough that interleaved or torn writes would show
    records = [record(request, {"writer": n, "text": chr(ord("a") + n) * 300_000}) for n in range(8)]
    start = threading.Barrier(len(records))
    failures: list[BaseException] = []

    def writer(data: bytes) -> None:
        remote = RemoteCache(f"s3://{bucket}/team/calls")  # one client each, as on separate machines
        start.wait()
        try:
            asyncio.run(remote.put(key, data))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(data,)) for data in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    stored = objects(client, bucket)
    assert list(stored) == [f"team/calls/{key[:2]}/{key[2:]}.json"]
    assert stored[next(iter(stored))] in records  # one writer's record, whole
    assert asyncio.run(RemoteCache(f"s3://{bucket}/team/calls").get(key)) in records


def test_concurrent_asks_in_one_build_fetch_once_and_a_failure_is_never_stored(tmp_path, s3):
    client, bucket = s3
    request = {"prompt": "warm"}
    warm = RemoteCache(f"s3://{bucket}/team/calls")
    asyncio.run(warm.put(CallCache.key(request), record(request, {"answer": "from the team"})))

    async def build() -> tuple[list, CallCache]:
        cache = CallCache(tmp_path / "cache", 4, RemoteCache(f"s3://{bucket}/team/calls"))

        async def never() -> dict:
            raise AssertionError("a warm remote answers")

        async def refused() -> dict:
            raise RuntimeError("the model refused")

        answers = await asyncio.gather(*(cache.call(request, never) for _ in range(5)))
        with pytest.raises(RuntimeError):
            await cache.call({"prompt": "cold"}, refused)
        return answers, cache

    answers, cache = asyncio.run(build())
    assert answers == [{"answer": "from the team"}] * 5
    assert cache.hits == 5 and cache.remote_hits == 1 and cache.warnings == []
    assert cache.calls == 1  # the cold one only: it was asked, and refused
    assert len(objects(client, bucket)) == 1  # the failed call left nothing, remote or local
    assert len(entries(tmp_path / "cache")) == 1


def test_a_damaged_or_foreign_remote_object_is_a_miss(tmp_path, s3):
    client, bucket = s3
    request = {"prompt": "q"}
    key = CallCache.key(request)
    client.put_object(Bucket=bucket, Key=f"team/calls/{key[:2]}/{key[2:]}.json",
                      Body=record({"prompt": "another question"}, {"answer": "wrong"}))

    async def build() -> tuple[dict, CallCache]:
        cache = CallCache(tmp_path / "cache", 4, RemoteCache(f"s3://{bucket}/team/calls"))

        async def model() -> dict:
            return {"answer": "right"}

        return await cache.call(request, model), cache

    got, cache = asyncio.run(build())
    assert got == {"answer": "right"} and cache.calls == 1 and cache.remote_hits == 0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once it is closed: connections are refused


@pytest.fixture
def silent_port():
    """A port that takes connections (the kernel's backlog does) and never answers a request."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


@pytest.mark.parametrize("remote", ["unreachable", "silent", "no such bucket", "not an s3 url"])
def test_a_remote_that_is_down_or_refuses_is_one_warning_and_the_model_answers(tmp_path, s3, monkeypatch, remote,
                                                                               request):
    if remote == "unreachable":
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port()}")
    elif remote == "silent":  # no hang: the request times out (shortened here), the remote is dropped
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{request.getfixturevalue('silent_port')}")
        monkeypatch.setattr(remotecache, "REQUEST_TIMEOUT_S", 1)
        monkeypatch.setattr(remotecache, "RETRY_TIMEOUT_S", 1)
        monkeypatch.setattr(remotecache, "MAX_RETRIES", 0)
    elif remote == "no such bucket":
        monkeypatch.setenv("KBUILD_CACHE_URL", "s3://kbuild-no-such-bucket/calls")
    else:
        monkeypatch.setenv("KBUILD_CACHE_URL", "https://example.invalid/calls")
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server)
        result = kbuild(root, "build")
        assert result.exit_code == 0, result.output
        assert len(server.requests) > 0 and pages(root)
        warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and "remote call cache" in warnings[0], result.output
        assert "local cache only" in warnings[0]
        assert len(entries(root / ".kbuild/cache")) == len(server.requests)  # the local cache still fills
