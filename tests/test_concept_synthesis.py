"""The model's synthesis on a concept page (rules/concepts.py, `concept_synthesis`): one to three
sentences saying what the sources together say of the concept, each citing the facts it draws on,
checked as a view on request is; its own query, so a page whose sentences did not change asks
nothing, and a synthesis that fails its checks leaves the page without it and fails the build."""
from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import kbuild
from model_replies import faithful_reply, sources
from openai_server import Reply, ScriptedServer
from test_concepts import RUNBOOK, STANDARD  # the same two documents the concept pages are tested on

PAGE = "kb/auth/concepts/multi-factor-authentication-mfa.md"


def is_synthesis(request: dict) -> bool:
    return (request.get("response_format") or {}).get("json_schema", {}).get("name") == "Synthesis"


def numbered(request: dict) -> dict[int, str]:
    """The facts a synthesis request offers, by their number."""
    return {int(n): text for n, text in re.findall(r"^\[(\d+)\] (.+)$", sources(request)[0], re.M)}


def synthesis_of(hours: str):
    """A model whose synthesis joins what the two sources say of MFA, giving the revocation
    limit as `hours` (the runbook says 24)."""
    def reply(request: dict) -> Reply:
        if not is_synthesis(request):
            return faithful_reply(request)
        facts = numbered(request)
        signs = next(n for n, text in facts.items() if "sign in" in text)
        revokes = next(n for n, text in facts.items() if "revoked" in text)
        return Reply(json.dumps({"statements": [
            {"text": "Every administrator MUST sign in with MFA.", "cites": [signs]},
            {"text": f"A lost MFA device MUST be revoked within {hours} hours.", "cites": [revokes]}]}))
    return reply


def store(root: Path, url: str) -> Path:
    assert kbuild(root, "init", str(root)).exit_code == 0
    model = {"base_url": f"{url}/v1", "api_key": "t", "model": "m"}
    (root / "Kbuildfile.py").write_text(  # small facts, so that each source has several
        "from pathlib import Path\nfrom kbuild.rules import knowledge_base\n"
        f"kb = knowledge_base(Path(__file__).parent, model={model!r}, floor_tokens=15, cap_tokens=40)\n"
        "RULES = kb.rules\ntargets = kb.targets\n")
    for name, text in (("standard.md", STANDARD), ("runbook.md", RUNBOOK)):
        (root / name).write_text(text)
        assert kbuild(root, "add", "auth", name).exit_code == 0
    return root


def executed(result) -> list[str]:
    return json.loads(result.output[result.output.index("{"):])["executed"]


def test_a_concept_page_opens_with_the_models_synthesis_citing_facts_that_exist(tmp_path):
    with ScriptedServer(synthesis_of("24")) as server:
        root = store(tmp_path, server.url)
        result = kbuild(root)
        assert result.exit_code == 0, result.output
        asked = [r for r in server.requests if is_synthesis(r)]
        assert asked, "no synthesis was asked"
        offered = " ".join(numbered(asked[-1]).values())
        assert "Access Standard" in offered and "Operations Runbook" in offered  # both sources, by title
        page = (root / PAGE).read_text()
        short = page.split("## In short\n", 1)[1].split("\n## ", 1)[0]
        lines = [line for line in short.splitlines() if line.startswith("- ")]
        assert lines[0].startswith("- Every administrator MUST sign in with MFA. ([")
        assert lines[1].startswith("- A lost MFA device MUST be revoked within 24 hours. ([")
        assert page.index("## In short") < page.index("## Access Standard")
        for line in lines:
            targets = re.findall(r"\]\(([^)]+\.md)\)", line)
            assert targets and all((root / PAGE).parent.joinpath(t).resolve().is_file() for t in targets), line
        assert "_Written by m (model output" in short  # who wrote these words, as every page of a model says
        assert kbuild(root, "check").exit_code == 0


def test_a_rebuild_with_nothing_changed_asks_nothing_and_an_edit_elsewhere_asks_no_synthesis(tmp_path):
    with ScriptedServer(synthesis_of("24")) as server:
        root = store(tmp_path, server.url)
        assert kbuild(root).exit_code == 0
        assert any(is_synthesis(r) for r in server.requests)
        before = len(server.requests)
        assert executed(kbuild(root, "build", "--json")) == []
        assert len(server.requests) == before
        (root / "standard.md").write_text(STANDARD.replace("after 15 minutes", "after 10 minutes"))
        result = kbuild(root, "build", "--json")
        assert result.exit_code == 0, result.output
        assert len(server.requests) > before  # the edited fact was read again by the model ...
        assert not [r for r in server.requests[before:] if is_synthesis(r)]  # ... the synthesis not asked
        assert not [q for q in executed(result) if q.startswith("concept_synthesis(")]
        assert "within 24 hours. ([" in (root / PAGE).read_text()


def test_a_synthesis_stating_a_number_its_facts_lack_is_refused_and_the_page_still_written(tmp_path):
    with ScriptedServer(synthesis_of("48")) as server:
        root = store(tmp_path, server.url)
        result = kbuild(root)
        assert result.exit_code != 0, result.output
        said = [line for line in result.output.splitlines() if "concept_synthesis" in line and "48" in line]
        assert len(said) == 1, result.output
        page = (root / PAGE).read_text()
        assert "## In short" not in page and "48" not in page
        assert "- A lost MFA device MUST be revoked within 24 hours. ([" in page  # the sources' own words stay
        assert "Traceback" not in result.output


def test_offline_a_concept_page_has_no_synthesis(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    for name, text in (("standard.md", STANDARD), ("runbook.md", RUNBOOK)):
        (tmp_path / name).write_text(text)
        assert kbuild(tmp_path, "add", "auth", name).exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    page = (tmp_path / PAGE).read_text()
    assert "## In short" not in page and "A lost MFA device MUST be revoked within 24 hours." in page
