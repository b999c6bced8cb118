"""The OpenAI-compatible backend against a real HTTP server that the test scripts."""
from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from openai_server import Fault, Reply, ScriptedServer

from kbuild.cli import main
from kbuild.model.openai_backend import OpenAIBackend
from kbuild.model.settings import ModelSettings

KBUILDFILE = """
from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, model={settings!r}, floor_tokens=40, cap_tokens=80)
RULES = kb.rules
targets = kb.targets
before_build = kb.before_build
max_calls = {max_calls}
"""

DOC = """# Payments

The service accepts card payments. A payment may not exceed 10,000 EUR.

## Refunds

Refunds are allowed within 90 days. A refund returns the whole amount to the card.

## Reports

A daily report lists every payment and refund. It is sent at 06:00 UTC to the finance team.
"""


def answer(request: dict) -> Reply:
    """Valid JSON for whichever schema was asked: the keys of every task's schema."""
    return Reply(json.dumps({"text": "A rewrite.", "summary": "A summary.", "abstract": "An abstract.",
                             "statements": [{"text": "A statement.", "cites": [1]}], "requirements": [],
                             "unsupported": []}),
                 prompt_tokens=100, completion_tokens=10)


def project(tmp_path: Path, server: ScriptedServer, max_calls: int = 4, **settings) -> Path:
    settings = {"base_url": f"{server.url}/v1", "api_key": "test", "model": "scripted", "max_retries": 3,
                "timeout": 5, "prices": {"scripted": (1.0, 2.0)}, **settings}
    (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE.format(settings=settings, max_calls=max_calls))
    (tmp_path / "doc.md").write_text(DOC)
    (tmp_path / "kb/pay").mkdir(parents=True)
    (tmp_path / "kb/pay/sources.yml").write_text("sources:\n  - id: doc\n    path: doc.md\n")
    return tmp_path


def kbuild(root: Path, *args: str):
    return CliRunner().invoke(main, ["-C", str(root), *args])


def report(root: Path) -> tuple[int, dict]:
    result = kbuild(root, "build", "--json")
    start = result.output.index("{")
    return result.exit_code, json.loads(result.output[start:result.output.rindex("}") + 1])


def test_structured_calls_are_cached_and_accounted(tmp_path):
    with ScriptedServer(answer) as server:
        root = project(tmp_path, server)
        code, first = report(root)
        assert code == 0, first
        calls = len(server.requests)
        assert calls >= 8  # rewrites and summaries of 3 chunks, a source summary, an abstract, view sections
        assert all(r["response_format"]["type"] == "json_schema" for r in server.requests)
        assert all("<source>" in r["messages"][1]["content"] for r in server.requests)
        view = (root / "kb/pay/artifacts/views/digest.md").read_text()
        assert "- A statement. ([" in view  # the model cites by number; the link is code's
        assert first["counters"]["tokens in"] == 100 * calls
        assert first["counters"]["tokens out"] == 10 * calls
        assert math.isclose(first["counters"]["cost USD"], calls * (100 * 1.0 + 10 * 2.0) / 1e6)
        fact = next((root / "kb/pay/facts/doc").glob("refunds*.md")).read_text()
        assert "A rewrite." in fact and "written by scripted" in fact
        code, second = report(root)
        assert code == 0 and len(server.requests) == calls  # a second build sends nothing
        (root / "doc.md").write_text(DOC.replace("90 days", "60 days"))
        status = kbuild(root, "status").output
        assert "model calls: at most" in status and "tokens in and" in status  # an estimate before paying
        (root / "doc.md").write_text(DOC)
        (root / "kb/pay/facts/doc/refunds.md").unlink()  # a lost page is rebuilt without a call
        code, third = report(root)
        assert code == 0 and len(server.requests) == calls and (root / "kb/pay/facts/doc/refunds.md").exists()
        (root / ".kbuild/state.db").unlink()  # every query runs again: the call cache answers
        (root / "kbuild.lock").unlink()
        code, fourth = report(root)
        assert code == 0 and len(server.requests) == calls and fourth["calls"] == 0 and fourth["cache_hits"] >= calls
        logs = kbuild(root, "logs", "-n", "100").output
        assert logs.count("rewrite") >= 3 and " cache " in logs
        assert "A statement." in kbuild(root, "logs", "-n", "1", "--full").output


def test_a_server_without_json_schema_gets_json_mode(tmp_path):
    with ScriptedServer(answer, json_schema=False) as server:
        root = project(tmp_path, server)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        assert "refused json_schema response formats; using JSON mode" in result.output
        modes = [r["response_format"]["type"] for r in server.requests]
        assert modes[0] == "json_schema"
        assert modes.count("json_schema") <= 4  # only the calls in flight when the server refused it
        assert "The JSON schema" in server.requests[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("fault", [Fault("429", retry_after=0.05), Fault("500"), Fault("502"), Fault("503"),
                                   Fault("reset"), Fault("truncated"), Fault("invalid_json"),
                                   Fault("timeout", delay=3)])
def test_each_fault_is_retried(tmp_path, fault):
    with ScriptedServer(answer) as server:
        root = project(tmp_path, server, max_calls=1, timeout=1)
        server.fail_next(fault)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        assert server.pending_faults == 0


def test_a_server_that_keeps_failing_fails_pages_cleanly_and_only_they_are_asked_again(tmp_path):
    with ScriptedServer(answer) as server:
        root = project(tmp_path, server, max_calls=1, max_retries=1)
        server.fail_next(*[Fault("500")] * 2)  # the first call and its one retry
        result = kbuild(root)
        assert result.exit_code == 1
        assert "the model server failed with 500 after 2 tries" in result.output
        assert "Traceback" not in result.output
        assert (root / "kb/pay/facts/doc/index.md").exists()  # the other pages were built
        asked = len(server.requests)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        assert len(server.requests) - asked <= 4  # the failed call, and what was built on it


def test_a_reply_that_does_not_fit_is_asked_again_with_the_error(tmp_path):
    bad = iter([Reply("{\"wrong\": 1}"), Reply("")])

    def reply(request: dict) -> Reply:
        return next(bad, None) or answer(request)

    with ScriptedServer(reply) as server:
        root = project(tmp_path, server, max_calls=1)
        assert kbuild(root).exit_code == 0
        retried = [r for r in server.requests if "did not fit the schema or failed a check" in r["messages"][-1]["content"]]
        assert len(retried) == 2
        assert "an empty reply" in retried[1]["messages"][-1]["content"]
        errors = kbuild(root, "logs", "--errors").output
        assert errors.count("ERROR") == 2


def test_replies_that_never_fit_fail_the_page_cleanly(tmp_path):
    with ScriptedServer(lambda r: Reply("not json at all")) as server:
        root = project(tmp_path, server, max_calls=1, validation_retries=1)
        result = kbuild(root)
        assert result.exit_code == 1
        assert "did not fit the rewrite schema or failed its checks after 2 tries" in result.output


def test_calls_in_flight_never_exceed_the_limit(tmp_path):
    def slow(request: dict) -> Reply:
        return Reply(answer(request).content, delay=0.2)

    with ScriptedServer(slow) as server:
        root = project(tmp_path, server, max_calls=2)
        assert kbuild(root).exit_code == 0
        assert server.max_in_flight == 2


def test_yes_probability_from_logprobs_and_without(tmp_path):
    class Ctx:
        query_id = "q"
        state_dir = tmp_path

        async def call(self, request, compute):
            return await compute()

    with_logprobs = Reply("yes", logprobs=[("yes", math.log(0.8), {"yes": math.log(0.8), "no": math.log(0.2)})])
    with ScriptedServer(lambda r: with_logprobs) as server:
        backend = OpenAIBackend(ModelSettings(base_url=f"{server.url}/v1", api_key="t", model="m").resolved())
        p, from_logprobs = asyncio.run(backend.yes_probability(Ctx(), "same", "Same meaning?", "a\nb"))
        assert from_logprobs and math.isclose(p, 0.8)
        assert server.requests[0]["logprobs"] is True
    with ScriptedServer(lambda r: Reply("No")) as server:
        backend = OpenAIBackend(ModelSettings(base_url=f"{server.url}/v1", api_key="t", model="m").resolved())
        assert asyncio.run(backend.yes_probability(Ctx(), "same", "Same meaning?", "a\nb")) == (0.0, False)


def test_no_key_and_no_base_url_means_the_offline_backend_said_once(tmp_path, monkeypatch):
    import kbuild.model.settings as settings

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(settings, "_said_offline", False)
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    first = kbuild(tmp_path)
    assert "using the offline backend" in first.output
    assert "using the offline backend" not in kbuild(tmp_path).output  # once per process


def test_a_vision_model_puts_each_table_and_figure_into_words_once(tmp_path):
    from documents import three_page_pdf

    with ScriptedServer(answer) as server:
        root = project(tmp_path, server, vision=True)
        (root / "report.pdf").write_bytes(three_page_pdf())
        (root / "kb/pay/sources.yml").write_text("sources:\n  - id: report\n    path: report.pdf\n")
        assert kbuild(root).exit_code == 0
        images = [part["image_url"]["url"] for r in server.requests for m in r["messages"]
                  if isinstance(m["content"], list) for part in m["content"] if part["type"] == "image_url"]
        assert len(images) == 2 and all(url.startswith("data:image/png;base64,iVBOR") for url in images)
        asked = len(server.requests)
        (root / ".kbuild/state.db").unlink()
        assert kbuild(root).exit_code == 0 and len(server.requests) == asked  # cached like any call
