"""`kbuild check` on a fresh git clone: no model, no network, no .kbuild/."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import kbuild
from documents import scripted_kbuildfile
from model_replies import answer
from openai_server import Reply, ScriptedServer


KBUILDFILE = '''
from pathlib import Path
from kbuild.engine import rule
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, floor_tokens=15, cap_tokens=40)

@rule(files=["glossary-prompt.md"])
async def glossary(ctx):
    """A rule of the project's own, with a prompt template of its own."""
    template = (Path(__file__).parent / "glossary-prompt.md").read_text()
    ctx.write("kb/shop/artifacts/glossary.md", template + "\\n- refund: money returned to a card\\n")
    return template

RULES = [*kb.rules, glossary]
before_build = kb.before_build

def targets():
    return [*kb.targets(), glossary()]
'''

PAYMENTS = """# Payments

A single payment MUST NOT exceed 10,000 EUR.

## Refunds

Refunds MUST be requested within 90 days of the payment. A refund returns the whole amount.
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def committed(root: Path) -> Path:
    """`root` made a git repository, everything in it committed."""
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "store")
    return root


def shop(origin: Path, notes: str = "notes.md") -> None:
    """The shop's store in `origin`, built: its own rule and prompt, two sources (the second
    named `notes`) and a view."""
    origin.mkdir(parents=True)
    assert kbuild(origin, "init", str(origin)).exit_code == 0
    (origin / "Kbuildfile.py").write_text(KBUILDFILE)
    (origin / "glossary-prompt.md").write_text("# Glossary")
    (origin / "payments.md").write_text(PAYMENTS)
    (origin / notes).write_text("# Notes\n\nThe shop opens at 09:00. It closes at 18:00 on weekdays.\n")
    for name in ("payments.md", notes):
        added = kbuild(origin, "add", "shop", name)
        assert added.exit_code == 0, added.output
    assert kbuild(origin, "view", "add", "shop", "refunds", "--about", "refund requests").exit_code == 0
    built = kbuild(origin)
    assert built.exit_code == 0, built.output


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    origin = tmp_path / "origin"
    shop(origin)
    committed(origin)
    copy = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(copy))
    assert not (copy / ".kbuild").exists()
    return copy


def findings(root: Path) -> tuple[int, list[dict[str, str]]]:
    result = kbuild(root, "check", "--format", "json")
    answer = json.loads(result.stdout)
    assert answer["schema"] == "kbuild.check/1"
    return result.exit_code, answer["findings"]


def test_a_fresh_clone_passes_and_the_check_writes_nothing(clone):
    result = kbuild(clone, "check")
    assert result.exit_code == 0, result.output
    assert "ok: every page is up to date" in result.output
    assert not (clone / ".kbuild").exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status == ""


def test_an_edited_source_makes_every_dependent_page_stale_until_built(clone):
    (clone / "payments.md").write_text(PAYMENTS.replace("90 days", "60 days"))
    code, found = findings(clone)
    assert code == 1
    stale = {f["page"] for f in found if f["reason"].startswith("stale")}
    assert {"kb/shop/raw/payments/original.md", "kb/shop/facts/payments/text.md", "kb/shop/facts/payments/refunds.md",
            "kb/shop/facts/payments/index.md", "kb/shop/index.md", "kb/index.md",
            "kb/shop/artifacts/views/refunds.md"} <= stale | {f["page"] for f in found}
    assert not any("/notes/" in page for page in stale)  # the other source's pages are not named
    assert all(f["fix"] == "kbuild" for f in found if f["reason"].startswith("stale"))
    assert kbuild(clone).exit_code == 0
    assert kbuild(clone, "check").exit_code == 0


def test_a_hand_edited_view_fails(clone):
    view = clone / "kb/shop/artifacts/views/refunds.md"
    view.write_text(view.read_text() + "\n- Refunds are always free. (trust me)\n")
    code, found = findings(clone)
    assert code == 1
    reasons = [f["reason"] for f in found if f["page"] == "kb/shop/artifacts/views/refunds.md"]
    assert any("edited by hand" in r for r in reasons)
    assert any("grounding verdict" in r for r in reasons)


def test_a_deleted_fact_fails_on_the_links_to_it(clone):
    (clone / "kb/shop/facts/payments/refunds.md").unlink()
    code, found = findings(clone)
    assert code == 1
    assert any(f["page"] == "kb/shop/facts/payments/refunds.md" and f["reason"].startswith("missing") for f in found)
    dangling = [f for f in found if "links to a missing file" in f["reason"]]
    assert {f["page"] for f in dangling} >= {"kb/shop/facts/payments/index.md", "kb/shop/artifacts/views/refunds.md"}


def test_a_source_added_but_not_built_fails(clone):
    (clone / "more.md").write_text("# More\n\nMore words.\n")
    assert kbuild(clone, "add", "shop", "more.md").exit_code == 0
    code, found = findings(clone)
    assert code == 1
    assert any(f["reason"] == "not built: source more is listed in kb/shop/sources.yml" for f in found)


def test_a_changed_prompt_names_exactly_that_rules_pages(clone):
    (clone / "glossary-prompt.md").write_text("# Glossary of terms")
    code, found = findings(clone)
    assert code == 1
    assert [(f["page"], f["reason"]) for f in found if f["kind"] == "stale"] == [
        ("kb/shop/artifacts/glossary.md", "stale: rule glossary changed")]
    assert [(f["kind"], f["cause"]) for f in found if f["kind"] != "stale"] == [("changed-rule", "rule glossary")]


def test_an_orphan_and_the_github_format(clone):
    (clone / "kb/shop/facts/payments/old-page.md").write_text("a page no rule writes")
    result = kbuild(clone, "check", "--format", "github")
    assert result.exit_code == 1
    assert ("::error file=kb/shop/facts/payments/old-page.md,title=Orphan page::kb/shop/facts/payments/old-page.md: "
            "orphan: no rule produces this page%0AFix: rm kb/shop/facts/payments/old-page.md") in result.output


def test_a_broken_lock_means_the_check_could_not_run(clone):
    (clone / "kbuild.lock").write_text("<<<<<<< HEAD\n")
    result = kbuild(clone, "check")
    assert result.exit_code == 2 and "could not run" in result.output and "merge conflict" in result.output


def test_a_model_link_to_a_missing_page_is_cleaned_to_its_words_and_the_page_built(tmp_path):
    """A link a model writes that leads to no page costs the page its link, not the page: code
    keeps the words, and the model is not asked again for what code can clean."""
    def reply(request: dict) -> Reply:
        got = answer(request)
        if "rewrite" in got:
            got["rewrite"] += " [see](nowhere.md) and [the text](text.md)"
        return Reply(json.dumps(got))

    with ScriptedServer(reply, string_bounds=True) as server:
        root = tmp_path
        (root / "Kbuildfile.py").write_text(scripted_kbuildfile(server.url, validation_retries=2) + "max_calls = 1\n")
        (root / "doc.md").write_text("# Doc\n\nOne fact about the shop.\n")
        (root / "kb/p").mkdir(parents=True)
        (root / "kb/p/sources.yml").write_text("sources:\n  - id: doc\n    path: doc.md\n")
        first = kbuild(root)
        assert first.exit_code == 0, first.output
        readings = [r for r in server.requests if r["response_format"]["json_schema"]["name"] == "ChunkReading"]
        assert len(readings) == 1
    fact = (root / "kb/p/facts/doc/doc.md").read_text()
    assert "see and [the text](text.md)" in fact and "nowhere.md" not in fact
    assert kbuild(root, "check").exit_code == 0


def test_a_page_whose_rebuild_failed_stays_stale(clone):
    (clone / "payments.md").write_text(PAYMENTS.replace("# Payments", "# Payments\n\nSee the terms."))
    (clone / "Kbuildfile.py").write_text(KBUILDFILE.replace("kb = knowledge_base(", "kb = knowledge_base(backend=Careless(), root=")
                                         .replace("from kbuild.rules import knowledge_base", CARELESS))
    result = kbuild(clone)
    assert result.exit_code == 1 and "says 45, which its sources do not" in result.output, result.output
    code, found = findings(clone)
    assert code == 1 and any(f["page"].startswith("kb/shop/facts/payments/") and f["reason"].startswith("stale")
                             for f in found)


CARELESS = """from kbuild.rules import knowledge_base
from kbuild.model.offline import OfflineBackend

class Careless(OfflineBackend):
    '''An offline backend whose rewrites state a number their source does not, as a careless model would.'''
    async def read_chunk(self, ctx, span, *args, **kwargs):
        return {**await super().read_chunk(ctx, span, *args, **kwargs), "rewrite": span + " It takes 45 days."}
"""


def test_a_statement_with_a_number_its_fact_does_not_hold_is_refused_by_code(tmp_path):
    def reply(request: dict) -> Reply:
        got = answer(request)
        if "statements" in got:  # a view on request: the model writes its statements
            got["statements"] = [{"text": "Refunds MUST be requested within 30 days.", "cites": [1]}]
        return Reply(json.dumps(got))

    with ScriptedServer(reply, string_bounds=True) as server:
        (tmp_path / "Kbuildfile.py").write_text(scripted_kbuildfile(server.url, validation_retries=1))
        (tmp_path / "payments.md").write_text(PAYMENTS)
        (tmp_path / "kb/p").mkdir(parents=True)
        (tmp_path / "kb/p/sources.yml").write_text("sources:\n  - id: payments\n    path: payments.md\n"
                                                   "views:\n  - name: refunds\n    about: refunds requested\n")
        result = kbuild(tmp_path)
        assert result.exit_code == 1
        assert "says 30, which its facts do not" in result.output
        sent_back = [r for r in server.requests if "says 30, which its facts do not" in r["messages"][-1]["content"]]
        assert sent_back  # the model was asked again with the failure before the section failed
        view = tmp_path / "kb/p/artifacts/views/refunds.md"
        assert not view.exists() or "within 30 days" not in view.read_text()  # never written with it


def test_a_page_the_grounding_call_rejects_is_not_written_and_the_old_one_stays(tmp_path):
    reject = {"on": False}

    def reply(request: dict) -> Reply:
        got = answer(request)
        if "rewrite" in got:  # a sentence in words the source does not use: code doubts it, the model decides
            got["rewrite"] += "\n\nRefunds are handled by the finance team."
        if "unsupported" in got:
            asked = request["messages"][1]["content"]
            got["unsupported"] = [1] if reject["on"] and "[1] Refunds are handled by the finance team." in asked else []
        return Reply(json.dumps(got))

    with ScriptedServer(reply, string_bounds=True) as server:
        (tmp_path / "Kbuildfile.py").write_text(scripted_kbuildfile(server.url))
        (tmp_path / "payments.md").write_text(PAYMENTS)
        (tmp_path / "kb/p").mkdir(parents=True)
        (tmp_path / "kb/p/sources.yml").write_text("sources:\n  - id: payments\n    path: payments.md\n")
        assert kbuild(tmp_path).exit_code == 0
        grounding = [r for r in server.requests if r["response_format"]["json_schema"]["name"] == "Grounding"]
        assert grounding and all("finance team" in r["messages"][1]["content"] for r in grounding)
        fact = tmp_path / "kb/p/facts/payments/payments.md"
        before = fact.read_text()
        assert kbuild(tmp_path, "check").exit_code == 0
        reject["on"] = True
        (tmp_path / "payments.md").write_text(PAYMENTS.replace("the whole amount", "the whole amount, in EUR"))
        result = kbuild(tmp_path)
        assert result.exit_code == 1
        assert "\"Refunds are handled by the finance team.\" is not supported by its sources" in result.output
        assert fact.read_text() == before
        assert kbuild(tmp_path, "check").exit_code == 1  # and CI says so until it is fixed
