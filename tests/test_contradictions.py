"""Where sources disagree: found by code, reported by `kbuild check`, accepted in sources.yml, shown
in a research project's agreements view."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import kbuild

from kbuild.store.sources import parse
from kbuild.text.disagreement import Attribute, candidate

POLICY = """# Refund policy

## Refunds

Refunds MUST be requested within 90 days of the payment. A refund returns the whole amount to the card.
"""

FAQ = """# Questions customers ask

## Refunds

Refunds MUST be requested within 30 days of the payment. Ask the shop for the form.
"""


def built(root: Path, kind: str, sources: dict[str, str]) -> Path:
    assert kbuild(root, "init", str(root)).exit_code == 0
    for name, text in sources.items():
        (root / name).write_text(text)
        assert kbuild(root, "add", "shop", name).exit_code == 0
    if kind != "docs":
        listed = root / "kb/shop/sources.yml"
        listed.write_text(listed.read_text().replace("kind: docs", f"kind: {kind}"))
    result = kbuild(root)
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return built(tmp_path, "docs", {"policy.md": POLICY, "faq.md": FAQ})


def test_two_sources_disagreeing_on_a_number_fail_the_check_naming_both(shop):
    result = kbuild(shop, "check")
    assert result.exit_code == 1, result.output
    line = next(line for line in result.output.splitlines() if "disagree" in line)
    assert "policy" in line and "faq" in line and "90 days" in line and "30 days" in line
    report = json.loads(kbuild(shop, "check", "--format", "json").output)
    found = [p for p in report["problems"] if p["kind"] == "contradiction"]
    assert len(found) == 1 and not report["ok"]
    assert "kb/shop/facts/policy/" in found[0]["message"] and "kb/shop/facts/faq/" in found[0]["message"]
    sarif = json.loads(kbuild(shop, "check", "--format", "sarif").output)
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["contradiction"]
    github = kbuild(shop, "check", "--format", "github").output
    assert github.startswith("::error file=kb/shop/facts/policy/") and "title=Sources disagree" in github


def test_an_accepted_disagreement_is_reported_as_accepted_and_passes(shop):
    report = json.loads(kbuild(shop, "check", "--format", "json").output)
    facts = [p for p in report["problems"] if p["kind"] == "contradiction"][0]["cause"].split(" <> ")
    listed = shop / "kb/shop/sources.yml"
    listed.write_text(listed.read_text() + "accepted_disagreements:\n"
                      f"  - facts: [{facts[0]}, {facts[1]}]\n    reason: the FAQ is older; legal is asked\n")
    assert kbuild(shop).exit_code == 0
    result = kbuild(shop, "check")
    assert result.exit_code == 0, result.output
    assert "accepted" in result.output and "the FAQ is older" in result.output
    report = json.loads(kbuild(shop, "check", "--format", "json").output)
    assert report["ok"] and [f["kind"] for f in report["findings"]] == ["accepted-contradiction"]


def test_an_accepted_disagreement_must_name_two_facts_and_a_reason():
    found = parse(b"sources: []\naccepted_disagreements:\n  - facts: [a/b]\n", "sources.yml")
    assert found.accepted == [] and "accepted_disagreements #1" in found.problems[0]
    assert "reason" in found.problems[0] and "facts" in found.problems[0]


def test_the_research_stores_agreements_view_shows_both_results(tmp_path):
    trial = "# Trial\n\n## Results\n\nCaching reduced latency by 40 percent in the trial.\n"
    production = "# Production\n\n## Results\n\nCaching reduced latency by 12 percent in production.\n"
    root = built(tmp_path, "research", {"trial.md": trial, "production.md": production})
    page = (root / "kb/shop/artifacts/views/agreements.md").read_text()
    assert "A gap" not in page
    assert "Caching reduced latency by 40 percent in the trial." in page
    assert "Caching reduced latency by 12 percent in production." in page
    assert "(../../facts/trial/" in page and "(../../facts/production/" in page


def test_a_restatement_is_no_disagreement_and_a_changed_force_is():
    assert candidate("A session token must be revoked within 24 hours.",
                     "Within 1 day, a session token MUST be revoked.") is None
    found = candidate("Sessions MUST expire after 30 minutes of inactivity.",
                      "Sessions SHOULD expire after 30 minutes of inactivity.")
    assert found is not None and (found.attribute, found.first, found.second) == (Attribute.FORCE, "MUST", "SHOULD")


def test_a_model_judges_each_candidate_reasoning_first_and_its_agree_is_kept(tmp_path):
    from documents import scripted_kbuildfile
    from model_replies import faithful_reply
    from openai_server import ScriptedServer

    def judge(request: dict):
        name = (request.get("response_format") or {}).get("json_schema", {}).get("name")
        if name == "DisagreementVerdict":
            return json.dumps({"reasoning": "The two name different refunds.", "verdict": "agree"})
        return faithful_reply(request)

    with ScriptedServer(judge) as server:
        assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
        (tmp_path / "Kbuildfile.py").write_text(scripted_kbuildfile(server.url))
        for name, text in {"policy.md": POLICY, "faq.md": FAQ}.items():
            (tmp_path / name).write_text(text)
            assert kbuild(tmp_path, "add", "shop", name).exit_code == 0
        result = kbuild(tmp_path)
        assert result.exit_code == 0, result.output
        asked = [r for r in server.requests
                 if (r.get("response_format") or {}).get("json_schema", {}).get("name") == "DisagreementVerdict"]
        # one question (a server that refuses bounded formats is asked it again, strict)
        assert len({json.dumps(r["messages"]) for r in asked}) == 1, result.output
        schema = asked[-1]["response_format"]["json_schema"]["schema"]
        assert list(schema["properties"]) == ["reasoning", "verdict"]  # it reasons before it decides
        text = json.dumps(asked[0]["messages"])
        assert "within 90 days" in text and "within 30 days" in text
        result = kbuild(tmp_path, "check")
        assert result.exit_code == 0, result.output  # the judge's "agree" stands: no finding
        before = len(server.requests)
        assert kbuild(tmp_path).exit_code == 0
        assert len(server.requests) == before  # nothing changed: no verdict is asked again


def test_the_glossary_makes_an_acronym_and_its_expansion_one_subject():
    from kbuild.retrieval.expansion import GlossaryTerm, SameWords

    mfa = GlossaryTerm(term="MFA", means="multi-factor authentication", kind="acronym",
                       sentence="Multi-factor authentication (MFA) ...", cites=["a/b"])
    first, second = ("MFA devices MUST be revoked within 24 hours.",
                     "A lost multi-factor authentication device MUST be revoked within 48 hours.")
    assert candidate(first, second) is None  # "mfa" and "multi factor authentication" share too few words
    found = candidate(first, second, SameWords([mfa]))
    assert found is not None and (found.first, found.second) == ("at most 24 hours", "at most 48 hours")


def test_the_labelled_pairs_meet_the_aims_of_the_contradiction_check():
    from benchmarks.synthesis import DATA, labelled

    pairs = json.loads(DATA.read_text())["pairs"]
    assert sum(p["disagree"] for p in pairs) >= 30 and sum(not p["disagree"] for p in pairs) >= 30
    precision, recall, _ = labelled(pairs)
    assert precision >= 0.9 and recall >= 0.8


def test_an_obligation_with_an_exception_is_no_disagreement_of_force():
    """The one pair code flagged over 24 OWASP sheets, which failed `kbuild check` on them."""
    from kbuild.text.disagreement import candidate

    assert candidate("Where possible, encryption keys should themselves be stored in an encrypted form.",
                     "You should not store keys next to the secrets they encrypt, except if those keys are "
                     "encrypted themselves (see envelope encryption).") is None
    assert candidate("Passwords MUST be stored with a salt.", "Passwords SHOULD be stored with a salt.") is not None
