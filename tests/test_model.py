"""The OpenAI-compatible backend against a real HTTP server that the test scripts."""
from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path

import pytest
from conftest import kbuild
from model_replies import answer as faithful_answer
from model_replies import faithful_reply
from openai_server import Fault, Reply, ScriptedServer, strict_schema_errors

from kbuild.model import Backend
from kbuild.model.openai_backend import OpenAIBackend
from kbuild.model.settings import ModelSettings

KBUILDFILE = """
from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, model={settings!r}, floor_tokens=15, cap_tokens=80)
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
    """A faithful answer to whichever question was asked, with fixed token counts."""
    return Reply(faithful_reply(request).content, prompt_tokens=100, completion_tokens=10)


def project(tmp_path: Path, server: ScriptedServer, max_calls: int = 4, **settings) -> Path:
    settings = {"base_url": f"{server.url}/v1", "api_key": "test", "model": "scripted", "max_retries": 3,
                "timeout": 5, "prices": {"scripted": (1.0, 2.0)}, **settings}
    (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE.format(settings=settings, max_calls=max_calls))
    (tmp_path / "doc.md").write_text(DOC)
    (tmp_path / "kb/pay").mkdir(parents=True)
    (tmp_path / "kb/pay/sources.yml").write_text("sources:\n  - id: doc\n    path: doc.md\n")
    return tmp_path


def report(root: Path) -> tuple[int, dict]:
    result = kbuild(root, "build", "--json")
    start = result.output.index("{")
    return result.exit_code, json.loads(result.output[start:result.output.rindex("}") + 1])


def test_structured_calls_are_cached_and_accounted(tmp_path):
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server)
        code, first = report(root)
        assert code == 0, first
        calls = len(server.requests)
        names = [r["response_format"]["json_schema"]["name"] for r in server.requests]
        # one reading per chunk (3 chunks), the summaries above them; default views are code's
        assert names.count("ChunkReading") == 3 and "Section" not in names, names
        assert all(r["response_format"]["type"] == "json_schema" for r in server.requests)
        assert all("<source>" in r["messages"][1]["content"] for r in server.requests)
        view = (root / "kb/pay/artifacts/views/digest.md").read_text()
        assert "- Refunds are allowed within 90 days. ([" in view  # the picked sentence, the link code's
        assert first["counters"]["tokens in"] == 100 * calls
        assert first["counters"]["tokens out"] == 10 * calls
        assert math.isclose(first["counters"]["cost USD"], calls * (100 * 1.0 + 10 * 2.0) / 1e6)
        fact = next((root / "kb/pay/facts/doc").glob("refunds*.md")).read_text()
        assert fact.count("Refunds are allowed within 90 days.") == 2 and "written by scripted" in fact
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
        assert logs.count("reading") >= 3 and " cache " in logs
        full = kbuild(root, "logs", "-n", "1", "--full").output
        assert "[response_format]" in full and '"strict": true' in full and "[parameters]" in full


def test_every_schema_kbuild_sends_is_one_openai_accepts_in_strict_mode(tmp_path):
    """The scripted server refuses what OpenAI refuses; a build against it never leaves
    structured outputs, and every schema it was sent passes OpenAI's strict rules."""
    with ScriptedServer(answer) as server:
        root = project(tmp_path, server)
        (root / "kb/pay/sources.yml").write_text("sources:\n  - id: doc\n    path: doc.md\nviews:\n"
                                                 "  - name: refunds\n    about: refunds and their limits\n"
                                                 "specs:\n  - name: refunding\n    view: refunds\n")
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        sent = [r["response_format"] for r in server.requests]
        accepted = [f for f in sent if f["type"] == "json_schema"]
        assert {f["json_schema"]["name"] for f in accepted} >= {"ChunkReading", "SourceSummary", "Abstract",
                                                                  "Section", "Spec"}
        # the calls in flight when the server first refused string bounds had them; no other
        bounded = [f for f in accepted if strict_schema_errors(f["json_schema"]["schema"])]
        assert 1 <= len(bounded) <= 4 and sent[0] in bounded
        # the first call is a reading or, on a busy machine, a view's section (it needs no reading)
        lengths = re.findall(r'"maxLength": (-?\d+)', json.dumps(sent[0]["json_schema"]["schema"]))
        assert lengths and all(int(n) > 0 for n in lengths)
        for fmt in accepted:
            assert fmt["json_schema"]["strict"] is True
            assert strict_schema_errors(fmt["json_schema"]["schema"], string_bounds=fmt in bounded) == [], fmt
        assert "refused bounded response formats" in result.output and "sending strict" in result.output
        assert all(f["type"] == "json_schema" for f in sent)  # never JSON mode
        reading = next(f for f in accepted if f not in bounded and f["json_schema"]["name"] == "ChunkReading")
        assert reading["json_schema"]["schema"]["properties"]["digest"]["maxItems"] == 3  # bounds OpenAI takes


def test_a_server_that_takes_string_bounds_gets_them_and_each_call_a_sized_budget(tmp_path):
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server)
        result = kbuild(root)
        assert result.exit_code == 0, result.output and "refused" not in result.output
        readings = [r for r in server.requests if r["response_format"]["json_schema"]["name"] == "ChunkReading"]
        bounds = [r["response_format"]["json_schema"]["schema"]["properties"]["summary"]["maxLength"] for r in readings]
        assert bounds and all(b > 0 for b in bounds)
        budgets = sorted(r["max_tokens"] for r in server.requests)
        assert budgets[0] < budgets[-1]  # sized per task from its input, not one number for all


def test_the_openai_sdks_strict_form_and_the_scripted_servers_rules_agree():
    from pydantic import BaseModel

    from kbuild.model.openai_backend import Section, sent_schema

    class Loose(BaseModel):
        name: str
        tags: list[str] = []

    assert strict_schema_errors(Loose.model_json_schema())  # what _strict() sent: refused
    assert strict_schema_errors(sent_schema(Section, "strict", {})) == []
    assert strict_schema_errors(sent_schema(Section, "bounded", {})) != []  # maxLength: not for OpenAI
    assert strict_schema_errors(sent_schema(Section, "bounded", {}), string_bounds=True) == []


def test_a_server_without_json_schema_gets_json_mode(tmp_path):
    with ScriptedServer(answer, json_schema=False) as server:
        root = project(tmp_path, server)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        assert "refused strict response formats" in result.output and "sending json_object" in result.output
        modes = [r["response_format"]["type"] for r in server.requests]
        assert modes[0] == "json_schema"
        assert modes.count("json_schema") <= 8  # only the calls in flight when the server refused each
        assert "The JSON schema" in server.requests[-1]["messages"][-1]["content"]


@pytest.mark.slow
@pytest.mark.parametrize("fault", [Fault("429", retry_after=0.05), Fault("500"), Fault("502"), Fault("503"),
                                   Fault("reset"), Fault("truncated"), Fault("invalid_json")],
                         ids=lambda fault: fault.kind)
def test_each_fault_is_retried(tmp_path, fault):
    """Each fault in which the server is surely not answering the request is retried; a timeout is
    not (test_a_silent_server_times_out_with_one_clear_line_and_is_not_asked_again)."""
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server, max_calls=1, timeout=1)
        server.fail_next(fault)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        assert server.pending_faults == 0


def test_a_server_that_keeps_failing_fails_pages_cleanly_and_only_they_are_asked_again(tmp_path):
    with ScriptedServer(answer, string_bounds=True) as server:
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
        again = [r.get("response_format", {}).get("json_schema", {}).get("name", "judge") for r in server.requests[asked:]]
        assert again.count("ChunkReading") == 1 and len(again) <= 5, again  # the failed call, and what was built on it


def test_a_reply_that_does_not_fit_is_asked_again_with_the_error(tmp_path):
    bad = iter([Reply("{\"wrong\": 1}"), Reply("")])

    def reply(request: dict) -> Reply:
        return next(bad, None) or answer(request)

    with ScriptedServer(reply, string_bounds=True) as server:
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
        assert "did not fit the reading schema or failed its checks after 2 tries" in result.output


def test_calls_in_flight_never_exceed_the_limit(tmp_path):
    def slow(request: dict) -> Reply:
        return Reply(answer(request).content, delay=0.2)

    with ScriptedServer(slow, string_bounds=True) as server:
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


def test_no_key_and_no_base_url_means_the_offline_backend_said_by_a_build_only(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 3 tries.\n")
    add = kbuild(tmp_path, "add", "p", "a.md")
    assert add.exit_code == 0 and "offline backend" not in add.output
    first = kbuild(tmp_path)
    assert first.output.count("using the offline backend") == 1
    for command in (["check"], ["search", "limit"], ["status"], ["-q"]):
        assert "offline backend" not in kbuild(tmp_path, *command).output, command
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 4 tries.\n")
    assert "offline backend" not in kbuild(tmp_path, "-q").output  # quiet is quiet


def test_a_vision_model_puts_each_table_and_figure_into_words_once(tmp_path):
    from documents import three_page_pdf

    with ScriptedServer(answer, string_bounds=True) as server:
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


def yes_to_everything(request: dict) -> Reply:
    """A server that ignores logprobs and says "yes" whenever it is asked yes or no."""
    got = faithful_reply(request)
    return Reply("yes") if got.content == "no" else got


@pytest.mark.parametrize("server_kind", ["ignores logprobs", "refuses logprobs"])
def test_the_meaning_judge_never_says_same_without_evidence(tmp_path, server_kind):
    doc = "# Results\n\nThe measurement has high confidence according to the team.\n"
    edited = doc.replace("high confidence", "low confidence")
    kwargs = {"logprobs": False} if server_kind == "refuses logprobs" else {}
    with ScriptedServer(yes_to_everything, string_bounds=True, **kwargs) as server:
        root = project(tmp_path, server)
        (root / "doc.md").write_text(doc)
        assert kbuild(root).exit_code == 0
        (root / "doc.md").write_text(edited)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        fact = next((root / "kb/pay/facts/doc").glob("results*.md")).read_text()
        assert "low confidence" in fact.split("## Rewritten")[1]  # the new text, not the old kept as "same"
        judged = [r for r in server.requests if r.get("logprobs")]
        assert judged  # the judge was asked: only its answer was not taken as evidence
        if server_kind == "refuses logprobs":
            assert result.output.count("the meaning judge is off") == 1 and "Traceback" not in result.output


def test_a_failed_page_is_named_by_the_pages_above_it_never_hidden(tmp_path):
    """After a model fault the source index dropped the failed fact's line and rewrote its summary
    from the rest, and kb/index.md lost the project's line. Then the pages above kept their
    previous version, and stopped following the rest of the project (issue 49)."""
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server, max_calls=1, max_retries=0)
        assert kbuild(root).exit_code == 0
        digest = (root / "kb/pay/artifacts/views/digest.md").read_text()
        assert "- [refunds](refunds.md)" in (root / "kb/pay/facts/doc/index.md").read_text()
        (root / "doc.md").write_text(DOC.replace("within 90 days", "within 60 days"))
        server.fail_next(Fault("500"))  # one of the readings this edit needs fails
        result = kbuild(root)
        assert result.exit_code == 1 and "the model server failed with 500" in result.output
        index = (root / "kb/pay/facts/doc/index.md").read_text()
        named = [line for line in index.splitlines() if line.endswith(": not built; run `kbuild` to see why")]
        assert len(named) == 1 and "- [payments](payments.md)" in index, index
        assert "(doc; 1 fact not built; run `kbuild` to see why): " in (root / "kb/pay/index.md").read_text()
        assert "- [pay](pay/index.md) (pay, 1 source): " in (root / "kb/index.md").read_text()
        # a view section cites the fact's page: the view keeps its previous version
        assert (root / "kb/pay/artifacts/views/digest.md").read_text() == digest
        third = kbuild(root)
        assert third.exit_code == 0, third.output  # the fault passed: everything is made whole again
        assert "60 days" in (root / "kb/pay/facts/doc/refunds.md").read_text()
        assert "- [refunds](refunds.md)" in (root / "kb/pay/facts/doc/index.md").read_text()


@pytest.mark.parametrize("placeholder", ["...", "Payments", "doc"])
def test_a_placeholder_is_no_summary_and_is_never_published_as_model_output(tmp_path, placeholder):
    """A small model answered "..." and it was published under "model output, checked against its sources"."""
    def lazy(request: dict) -> Reply:
        got = faithful_answer(request)
        if isinstance(got, dict):
            for key in ("summary", "abstract"):
                if key in got:
                    got[key] = placeholder
            for st in got.get("statements", []):
                st["text"] = placeholder
        return Reply(json.dumps(got) if isinstance(got, dict) else got)

    with ScriptedServer(lazy, string_bounds=True) as server:
        root = project(tmp_path, server, validation_retries=1)
        result = kbuild(root)
    assert result.exit_code == 1 and "says nothing" in result.output and "Traceback" not in result.output
    pages = "\n".join(p.read_text() for p in (root / "kb").rglob("index.md"))
    assert f": {placeholder}\n" not in pages and f"\n\n{placeholder}\n\n" not in pages


def _fingerprints(root: Path, model: dict | None) -> dict[str, str]:
    from kbuild.rules import knowledge_base

    return {r.name: r.fingerprint for r in knowledge_base(root, model=model).rules}


def test_a_check_without_the_key_sees_the_graph_the_model_built(tmp_path, monkeypatch):
    """CI runs `kbuild check` without the secret: a store built with a named model must not read
    as built by another backend there (every page stale, "rule ... changed")."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("KBUILD_MODEL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-on-the-laptop")
    pinned = _fingerprints(tmp_path, {"model": "gpt-4o-mini"})
    monkeypatch.setenv("KBUILD_MODEL", "gpt-4o-mini")
    from_environment = _fingerprints(tmp_path, None)
    monkeypatch.delenv("OPENAI_API_KEY")
    assert _fingerprints(tmp_path, {"model": "gpt-4o-mini"}) == pinned
    assert _fingerprints(tmp_path, None) == from_environment
    monkeypatch.delenv("KBUILD_MODEL")
    assert _fingerprints(tmp_path, None) != from_environment  # nothing named: the offline backend


def test_a_named_model_without_a_key_fails_its_calls_in_one_line_without_the_network(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KBUILD_MODEL", "gpt-4o-mini")
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 3 tries.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    result = kbuild(tmp_path, "-q")
    assert result.exit_code == 1, result.output
    assert "OPENAI_API_KEY" in result.output and "Traceback" not in result.output
    assert "cannot reach" not in result.output  # it never tried api.openai.com with no key


def test_a_check_that_knows_no_model_says_to_name_the_one_that_built_the_store(tmp_path, monkeypatch):
    with ScriptedServer(answer) as server:
        (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE.format(settings=None, max_calls=4))
        (tmp_path / "doc.md").write_text(DOC)
        (tmp_path / "kb/pay").mkdir(parents=True)
        (tmp_path / "kb/pay/sources.yml").write_text("sources:\n  - id: doc\n    path: doc.md\n")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-on-the-laptop")
        monkeypatch.setenv("KBUILD_MODEL", "scripted")
        assert kbuild(tmp_path, "-q").exit_code == 0
    monkeypatch.delenv("OPENAI_API_KEY")  # CI: the secret is not there, the names are
    named = kbuild(tmp_path, "check")
    assert named.exit_code == 0, named.output
    for name in ("OPENAI_BASE_URL", "KBUILD_MODEL"):
        monkeypatch.delenv(name)
    unnamed = kbuild(tmp_path, "check")
    assert unnamed.exit_code == 1 and "changed" in unnamed.output
    assert "no model is named here" in unnamed.output and "KBUILD_MODEL" in unnamed.output


def test_mending_how_calls_travel_leaves_every_page_current(tmp_path, monkeypatch):
    """An upgrade that only changes the transport (the client, rate limits, server failures) decides
    no reply, so it must not make every model-built page stale; a change to the backend that
    decides replies must."""
    import inspect

    from kbuild.model import openai_backend, transport

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    before = _fingerprints(tmp_path, {"model": "gpt-4o-mini"})
    real_getsource = inspect.getsource

    def edited(module):
        def getsource(obj):
            text = real_getsource(obj)
            return text + "\n# edited\n" if obj is module else text
        return getsource

    monkeypatch.setattr(inspect, "getsource", edited(transport))
    assert _fingerprints(tmp_path, {"model": "gpt-4o-mini"}) == before
    monkeypatch.setattr(inspect, "getsource", edited(openai_backend))
    after = _fingerprints(tmp_path, {"model": "gpt-4o-mini"})
    assert "fact" in {name for name in before if after[name] != before[name]}


def test_every_request_counts_against_the_rate_limit_the_meaning_judges_too(tmp_path):
    """requests_per_minute bounds what the server sees: a call that skipped the limiter (the
    meaning judge did) would run a tier's limit over and be refused."""
    class Ctx:
        query_id = "q"
        state_dir = tmp_path

        async def call(self, request, compute):
            return await compute()

    class Counting:
        acquired = 0

        async def acquire(self, amount: float = 1) -> None:
            Counting.acquired += 1

    with ScriptedServer(lambda r: Reply("yes")) as server:
        settings = ModelSettings(base_url=f"{server.url}/v1", api_key="t", model="m", requests_per_minute=600)
        backend = OpenAIBackend(settings.resolved())
        assert backend.transport._requests is not None
        backend.transport._requests = Counting()
        asyncio.run(backend.yes_probability(Ctx(), "same", "Same meaning?", "a\nb"))
        assert len(server.requests) == Counting.acquired == 1


# -- local servers: one slot, replies longer than the timeout, silence ------------------------------

def paced(request: dict) -> Reply:
    """A faithful answer generated a token at a time, 1.5 s in all: longer than a 1 s timeout."""
    got = answer(request)
    return Reply(got.content, prompt_tokens=100, completion_tokens=10, pace=1.5 / max(1, len(got.tokens())))


def sent_twice(server: ScriptedServer) -> list[dict]:
    bodies = [json.dumps(r, sort_keys=True) for r in server.requests]
    return [r for n, r in enumerate(server.requests) if bodies[n] in bodies[:n]]


@pytest.mark.slow
@pytest.mark.parametrize("report_slots", [True, False], ids=["llama.cpp /props", "learned"])
def test_a_one_slot_server_whose_replies_outlast_the_timeout_builds_with_each_request_sent_once(tmp_path,
                                                                                               report_slots):
    """llama.cpp with one slot on two cores: kbuild sent several requests at once, each timed out
    at 120 s (queued, or still generating) and was sent again, and 43 of 51 queries failed."""
    with ScriptedServer(paced, string_bounds=True, slots=1, report_slots=report_slots) as server:
        root = project(tmp_path, server, timeout=1)  # max_calls=4: the engine would send 4 at once
        code, built = report(root)
        assert code == 0, built
        assert server.abandoned == 0  # no reply was cut off, though each took longer than the timeout
        assert sent_twice(server) == []
        if report_slots:
            assert server.max_queued == 0  # never more at once than the server serves
        else:
            assert server.max_queued <= 1  # learning: at most one request waited, once, and was not cut off
        assert all(r["stream"] is True and r["stream_options"] == {"include_usage": True} for r in server.requests)
        assert built["counters"]["tokens in"] == 100 * len(server.requests)  # usage came in the stream's last chunk
        assert built["counters"]["tokens out"] == 10 * len(server.requests)
        logged = [json.loads(line) for line in kbuild(root, "logs", "-n", "100", "--json").output.splitlines()]
        assert logged and all((c["tokens_in"], c["tokens_out"]) == (100, 10) for c in logged if not c["cache_hit"])


def test_a_silent_server_times_out_with_one_clear_line_and_is_not_asked_again(tmp_path):
    def silent(request: dict) -> Reply:
        return Reply(answer(request).content, delay=60)  # reads the prompt for a minute: nothing comes

    with ScriptedServer(silent, string_bounds=True, slots=1) as server:
        root = project(tmp_path, server, timeout=1)
        result = kbuild(root)
        assert result.exit_code == 1
        failed = [line for line in result.output.splitlines() if line.startswith("failed:")]
        assert failed and all("the model server sent nothing for 1 s" in line for line in failed), result.output
        assert "Traceback" not in result.output
        assert sent_twice(server) == []  # the server may still be answering it: it is not asked again


@pytest.mark.slow
def test_a_server_that_refuses_a_second_request_with_503_is_sent_one_at_a_time(tmp_path):
    """KoboldCpp and older llama.cpp servers answer 503 when every slot is busy: that is the
    number of slots, not a failure to retry against."""
    with ScriptedServer(paced, string_bounds=True, slots=1, report_slots=False, queue=False) as server:
        root = project(tmp_path, server, timeout=1, max_retries=1)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        assert server.abandoned == 0 and server.refused_busy <= 1


def test_concurrency_set_by_hand_is_what_the_server_gets(tmp_path):
    def slow(request: dict) -> Reply:
        return Reply(answer(request).content, delay=0.3)

    with ScriptedServer(slow, string_bounds=True) as server:  # no slots reported: kbuild would learn them
        root = project(tmp_path, server, max_calls=4, concurrency=3)
        assert kbuild(root).exit_code == 0
        assert server.max_generating == 3  # the three readings at once, from the first


def test_openai_itself_gets_one_body_at_a_time_per_call_and_every_call_the_engine_allows(tmp_path, monkeypatch):
    """OpenAI's own API keeps its behaviour: replies in one body (streaming some models needs a
    verified organisation), as many calls in flight as max_calls, no /props asked."""
    from kbuild.model import transport

    monkeypatch.setattr(transport, "openai_itself", lambda base_url: True)

    def slow(request: dict) -> Reply:
        return Reply(answer(request).content, delay=0.3)

    with ScriptedServer(slow, string_bounds=True) as server:
        root = project(tmp_path, server, max_calls=3, timeout=1)
        assert kbuild(root).exit_code == 0
        assert server.max_generating == 3 and not any("stream" in r for r in server.requests)
        server.fail_next(Fault("timeout", delay=3))
        (root / "doc.md").write_text(DOC.replace("90 days", "60 days"))
        result = kbuild(root)
        assert result.exit_code == 1 and "the model server did not answer within 1 s" in result.output
        assert len(sent_twice(server)) == 0  # not sent again: OpenAI may still be answering it


def test_a_server_on_this_machine_or_its_network_is_local_and_starts_at_one_request():
    from kbuild.model.transport import is_local

    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8080/v1",
                "http://192.168.1.20:8000/v1", "http://10.0.0.5:8000/v1", "http://ollama:11434/v1",
                "http://gpu-box.local:8080/v1"):
        assert is_local(url), url
    for url in ("https://api.together.xyz/v1", "https://openrouter.ai/api/v1", "http://8.8.8.8/v1"):
        assert not is_local(url), url


class OnlyWhatItAnswers(Backend):
    """A plug-in's backend that implements the questions and none of the optional abilities."""

    name = "minimal"
    label = "written by a minimal plug-in"

    def params(self, task: str) -> dict[str, object]:
        return {"backend": self.name, "task": task}

    def prompts(self, task: str) -> list[object]:
        return []

    @property
    def code(self) -> tuple[object, ...]:
        return ()


def test_a_backend_lacking_the_optional_abilities_is_answered_for_by_the_protocol():
    """The build's notice, `kbuild status`'s estimate, `kbuild doctor` and the meaning check
    each ask a backend a typed question; one that lacks the ability gets the protocol's answer."""
    from kbuild.checks.meaning import classify
    from kbuild.services.doctor import _model

    backend = OnlyWhatItAnswers()
    assert (backend.notice, backend.asks_model, backend.settings) == (None, True, None)
    old, new = "The service accepts card payments from every merchant.", "The service accepts card payments from merchants in the EU."
    decision = asyncio.run(classify(None, old, new, backend))
    assert (decision.same, decision.stage) == (False, "edit")  # no model stage: the edit stage's answer
    finding = _model(backend)
    assert (finding.status, finding.what) == ("PASS", "model: written by a minimal plug-in")


def test_a_plugin_backend_written_against_another_protocol_is_one_line_when_chosen(monkeypatch):
    from kbuild.model import choice
    from kbuild.plugins import BackendEntry, Plugin, Registry

    class Old:  # answers the questions, but not what kbuild now asks of every backend
        name, label = "old", "old"

    plugin = Plugin("old", "kbuild-old", "0.1")
    monkeypatch.setattr(choice, "registry", lambda: Registry((plugin,), backends={"old": BackendEntry("old", plugin, lambda s: Old())}))
    with pytest.raises(ValueError, match=r"^model settings: backend 'old' of the plug-in kbuild-old 0.1 does not meet "
                                         r"kbuild.model.Backend; upgrade the plug-in"):
        choice.choose_backend({"backend": "old"})


def test_a_spec_prompt_names_the_keywords_its_view_obliges_with(tmp_path):
    """A view whose statements write no keyword in capitals (an OWASP sheet's "should") asks the
    model for its lower-case obligations; a standard's view for its capitals only."""
    class Ctx:
        query_id = "q"
        state_dir = tmp_path

        async def call(self, request, compute):
            return await compute()

        def warn(self, message):  # the scripted server refuses a first response format: said, then the next
            pass

        def count(self, name, amount):
            pass

    def prompt(texts: list[str]) -> str:
        with ScriptedServer(lambda r: Reply('{"requirements": []}')) as server:
            backend = OpenAIBackend(ModelSettings(base_url=f"{server.url}/v1", api_key="t", model="m").resolved())
            statements = [{"text": t, "cites": [f"s/f{n}"]} for n, t in enumerate(texts)]
            assert asyncio.run(backend.write_spec(Ctx(), "login", statements)) == []
            return "\n".join(m["content"] for m in server.requests[0]["messages"])

    plain = prompt(["Passwords must be at least 8 characters long.", "Lockouts should be logged."])
    assert "must, must not, shall, shall not, should or should not in lower case" in plain
    capitals = prompt(["Passwords MUST be at least 8 characters long.", "Lockouts should be logged."])
    assert "an RFC 2119 keyword in capitals (MUST" in capitals and "in lower case" not in capitals
