"""Concept pages (rules/concepts.py): what every source of a project says about one thing, in
its own sentences, each linked to its fact; the names of one thing joined (kbuild.text.concepts);
an edit rebuilds only the pages citing what it changed."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import kbuild

from kbuild.text.concepts import Concept, Names, closed, concept_key, phrases

DATA = Path(__file__).parent / "data"

STANDARD = """# Access Standard

## Second factors

Every administrator MUST sign in with Multi-Factor Authentication (MFA). The server keeps the shared secret.

## Sessions

Session tokens MUST expire after 15 minutes without a request.
"""

RUNBOOK = """# Operations Runbook

## Lost devices

A lost MFA device MUST be revoked within 24 hours.

## Logging out

On logout the server deletes the session token and its refresh key.
"""

HANDBOOK = """# Staff Handbook

## Signing in

Staff use multifactor authentication on every laptop.

## Browsers

A browser keeps session-tokens in a cookie that scripts cannot read.
"""


def executed(result) -> list[str]:
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])["executed"]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    kbuildfile = tmp_path / "Kbuildfile.py"  # small facts, so that each source has several
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000", "floor_tokens=15, cap_tokens=40"))
    for name, text in (("standard.md", STANDARD), ("runbook.md", RUNBOOK), ("handbook.md", HANDBOOK)):
        (tmp_path / name).write_text(text)
        assert kbuild(tmp_path, "add", "auth", name).exit_code == 0
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    return tmp_path


def links_of(page: Path) -> list[Path]:
    return [(page.parent / target).resolve() for target in re.findall(r"\]\(([^)]+\.md)\)", page.read_text())]


def test_a_defined_term_is_one_page_whatever_the_sources_call_it_with_its_definition_first(store):
    folder = store / "kb/auth/concepts"
    page = (folder / "multi-factor-authentication-mfa.md").read_text()
    assert page.startswith("# Multi-Factor Authentication (MFA)\n")
    sections = re.findall(r"^## (.+)$", page, re.M)
    assert sections == ["Access Standard", "Operations Runbook", "Staff Handbook"]  # the defining source first
    definition = page.index('**MFA** stands for Multi-Factor Authentication: "Every administrator MUST sign in')
    assert definition < page.index("## Access Standard")
    for sentence in ("- Every administrator MUST sign in with Multi-Factor Authentication (MFA).",
                     "- A lost MFA device MUST be revoked within 24 hours.",
                     "- Staff use multifactor authentication on every laptop."):
        line = next(line for line in page.splitlines() if line.startswith(sentence))
        assert re.search(r"\(\[[\w.-]+\]\(\.\./facts/\w+/[\w.-]+\.md\)\)$", line), line
    # one concept, not one per spelling: no page for "multifactor authentication" or "MFA" alone
    assert sorted(p.name for p in folder.glob("*m*f*a*.md")) == ["multi-factor-authentication-mfa.md"]
    assert "The server keeps the shared secret." not in page  # a sentence not about it


def test_a_phrase_several_sources_share_is_a_concept_and_every_statement_links_to_a_fact_that_exists(store):
    folder = store / "kb/auth/concepts"
    page = (folder / "session-token.md").read_text()
    assert page.startswith("# session token\n")  # as a sentence's middle writes it
    assert "- Session tokens MUST expire after 15 minutes without a request." in page
    assert "- On logout the server deletes the session token and its refresh key." in page
    assert "- A browser keeps session-tokens in a cookie that scripts cannot read." in page
    index = (folder / "index.md").read_text()
    assert "- [Multi-Factor Authentication (MFA)](multi-factor-authentication-mfa.md): **MFA** stands for" in index
    assert "- [session token](session-token.md): \"Session tokens MUST expire" in index
    for page in folder.glob("*.md"):
        assert all(target.is_file() for target in links_of(page)), page
    assert "- [concepts/](concepts/index.md): 2 concepts" in (store / "kb/auth/index.md").read_text()
    assert kbuild(store, "check").exit_code == 0


def test_an_edit_rebuilds_only_the_concept_pages_citing_what_changed_and_nothing_runs_twice(store):
    assert executed(kbuild(store, "build", "--json")) == []
    (store / "runbook.md").write_text(RUNBOOK.replace("within 24 hours", "within 12 hours"))
    ran = executed(kbuild(store, "build", "--json"))
    # the edited fact's mentions, and its neighbour's (a fact's chunk holds the words before it)
    assert {q.split(",")[2] for q in ran if q.startswith("fact_concepts(")} == {'"runbook"'}
    assert [q for q in ran if q.startswith("concept_page(")] == ['concept_page("auth","multi-factor-authentication-mfa")']
    page = (store / "kb/auth/concepts/multi-factor-authentication-mfa.md").read_text()
    assert "revoked within 12 hours" in page and "24 hours" not in page
    assert kbuild(store, "check").exit_code == 0


def test_an_edit_of_a_cited_fact_that_leaves_its_sentences_about_a_concept_rebuilds_no_concept_page(store):
    page = store / "kb/auth/concepts/multi-factor-authentication-mfa.md"
    before = page.read_text()
    (store / "standard.md").write_text(STANDARD.replace("The server keeps the shared secret.", "The server stores the shared secret."))
    ran = executed(kbuild(store, "build", "--json"))
    assert any(q.startswith('fact("auth","standard",') for q in ran)  # the fact that cites MFA was rebuilt ...
    assert not [q for q in ran if q.startswith("concept_page(")]  # ... and no page quotes the sentence it changed
    assert page.read_text() == before


def test_a_new_disagreement_rebuilds_only_the_concept_page_that_shows_it(store):
    (store / "runbook.md").write_text(RUNBOOK.replace(
        "On logout the server deletes the session token and its refresh key.",
        "On logout the server deletes the session token and its refresh key. "
        "Session tokens MUST expire after 30 minutes without a request."))
    result = kbuild(store, "build", "--json")
    ran = json.loads(result.output[result.output.index("{"):])["executed"]
    assert 'project_disagreements("auth")' in ran  # the standard says 15 minutes
    assert [q for q in ran if q.startswith("concept_page(")] == ['concept_page("auth","session-token")']
    page = (store / "kb/auth/concepts/session-token.md").read_text()
    disagree = page.split("## Where the sources disagree", 1)[1].split("\n## ", 1)[0]
    assert "15 minutes" in disagree and "30 minutes" in disagree


def test_a_removed_source_takes_its_statements_away(store):
    sources = store / "kb/auth/sources.yml"
    listed = sources.read_text()
    assert "handbook" in listed
    assert kbuild(store, "remove", "auth", "handbook").exit_code == 0
    assert kbuild(store).exit_code == 0
    page = (store / "kb/auth/concepts/multi-factor-authentication-mfa.md").read_text()
    assert "Staff Handbook" not in page and "multifactor" not in page
    # two facts say "session token" now, fewer than SHARED_FACTS: no concept, no page, no line
    assert not (store / "kb/auth/concepts/session-token.md").exists()
    assert "session-token.md" not in (store / "kb/auth/concepts/index.md").read_text()
    assert kbuild(store, "check").exit_code == 0


def test_every_spelling_of_a_name_is_one_key():
    assert {concept_key(n) for n in ("session tokens", "Session-Token", "session token(s)", "the session token")} \
        == {"sessiontoken"}
    assert concept_key("multifactor authentication") == concept_key("Multi-Factor Authentication")
    assert concept_key("policies") == concept_key("policy") and concept_key("access") == "access"
    assert concept_key("access token") != concept_key("refresh token")


def test_a_phrase_inside_a_longer_one_everywhere_it_stands_is_the_longer_one():
    found = {"factorauthentication": frozenset({"a/1", "b/1"}), "multifactorauthentication": frozenset({"a/1", "b/1"}),
             "accesscontrol": frozenset({"a/1", "b/2", "c/1"}), "roleaccesscontrol": frozenset({"a/1", "b/2"})}
    names = {"factorauthentication": "factor authentication", "multifactorauthentication": "multi factor authentication",
             "accesscontrol": "access control", "roleaccesscontrol": "role access control"}
    assert sorted(closed(found, names)) == ["accesscontrol", "multifactorauthentication", "roleaccesscontrol"]


def test_a_sentence_offers_its_acronyms_and_noun_runs_not_keywords_or_clauses():
    found = set(phrases("Every administrator MUST sign in with Multi-Factor Authentication (MFA) within 15 minutes."))
    assert {"mfa", "multifactorauthentication"} <= found
    assert "must" not in found and not any("within" in k or "15" in k for k in found)
    # a preposition, a quantifier or a light verb names nothing: "across multiple", "gain access"
    found = set(phrases("Attackers gain access to secrets stored across multiple browser tabs somewhere else."))
    assert found == {"browsertab"}
    cited = set(phrases("As Wu et al. show, static vs dynamic agents differ."))  # a citation, an abbreviation
    assert "dynamicagent" in cited and not [k for k in cited if "al" in k or "vs" in k or "static" in k]


def test_a_concept_is_found_by_any_of_its_names_and_an_acronym_only_in_capitals():
    mfa = Concept.named(["MFA", "Multi-Factor Authentication"])
    assert mfa.mentioned_in("Two MFAs are kept.") and mfa.mentioned_in("multifactor authentications")
    assert not mfa.mentioned_in("an mfa-like word") and not mfa.mentioned_in("mfa")
    it = Concept.named(["IT"])
    assert it.mentioned_in("Ask IT.") and not it.mentioned_in("Is it safe?")


def test_on_a_labelled_alias_set_at_most_two_percent_of_concepts_are_duplicates_and_none_are_merged():
    labelled = json.loads((DATA / "concept-aliases.json").read_text())
    names = Names()
    for short, spelled in labelled["glossary"]:  # what the sources define, as the glossary pairs them
        names.join(short, spelled)
    groups = labelled["same"]
    concepts = [{names.of(n) for n in group} for group in groups]
    duplicates = sum(len(c) - 1 for c in concepts)
    assert len(groups) >= 40 and sum(len(g) for g in groups) >= 150
    assert duplicates / len(groups) <= 0.02, [g for g, c in zip(groups, concepts) if len(c) > 1]
    # ... and no two different things made one: that would be a cheaper way to have no duplicates
    keys = [next(iter(c)) for c in concepts]
    assert len(set(keys)) == len(keys)
    for a, b in labelled["different"]:
        assert names.of(a) != names.of(b), (a, b)


def test_a_concept_page_shows_where_its_sources_disagree_both_sides_quoted(tmp_path):
    """Issue 54: a confirmed disagreement is shown on the concept page, both statements quoted and
    cited, never resolved by dropping one."""
    from conftest import kbuild

    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "policy.md").write_text("# Refund policy\n\nRefund requests MUST be made within 90 days of the "
                                        "payment.\n\nEvery refund request is logged.\n")
    (tmp_path / "faq.md").write_text("# Questions customers ask\n\nRefund requests MUST be made within 30 days of "
                                     "the payment.\n\nA refund request is answered by email.\n")
    (tmp_path / "terms.md").write_text("# Terms\n\nA refund request names the order.\n")
    for name in ("policy.md", "faq.md", "terms.md"):
        assert kbuild(tmp_path, "add", "shop", name).exit_code == 0
    kbuild(tmp_path)  # the check would fail on the disagreement: the page is what is asked here
    page = (tmp_path / "kb/shop/concepts/refund-request.md").read_text()
    disagree = page.split("## Where the sources disagree", 1)[1].split("\n## ", 1)[0]
    assert "within 90 days" in disagree and "within 30 days" in disagree, page
    assert "](../facts/policy/" in disagree and "](../facts/faq/" in disagree


REFUNDS = """# Refund policy

## Approvals

A refund above 500 euros needs an approver signed in with MFA.

## Consoles

The billing console ends a session token after 5 minutes without a request.

## Payouts

Payouts are sent every Friday.
"""


def with_across(store: Path, yaml: str) -> None:
    sources = store / "kb/auth/sources.yml"
    sources.write_text(sources.read_text() + yaml)


@pytest.fixture
def two_projects(store: Path) -> Path:
    """The auth store, and a billing project whose facts speak of auth's concepts."""
    (store / "refunds.md").write_text(REFUNDS)
    assert kbuild(store, "add", "billing", "refunds.md").exit_code == 0
    assert kbuild(store).exit_code == 0
    return store


def test_a_concept_page_gathers_what_another_project_says_only_when_across_names_it_and_its_links_resolve(two_projects):
    store = two_projects
    page = store / "kb/auth/concepts/multi-factor-authentication-mfa.md"
    assert "billing" not in page.read_text() and "approver" not in page.read_text()
    with_across(store, "concepts:\n  across: [billing]\n")
    result = kbuild(store)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert re.findall(r"^## (.+)$", text, re.M) == ["Access Standard", "Operations Runbook", "Staff Handbook",
                                                     "billing / Refund policy"]
    line = next(line for line in text.splitlines() if "approver" in line)
    assert line.startswith("- A refund above 500 euros needs an approver signed in with MFA. ([")
    assert re.search(r"\]\(\.\./\.\./billing/facts/refunds/[\w.-]+\.md\)\)$", line), line
    assert "console" in (store / "kb/auth/concepts/session-token.md").read_text()
    for concept in (store / "kb/auth/concepts").glob("*.md"):
        assert all(target.is_file() for target in links_of(concept)), concept
    # concepts are still the project's own: "Payouts", which only billing says, makes no page
    assert not list((store / "kb/auth/concepts").glob("payout*"))
    assert "(4 sources, 4 statements)" in (store / "kb/auth/concepts/index.md").read_text()
    assert kbuild(store, "check").exit_code == 0


def test_an_edit_in_another_project_rebuilds_only_the_concept_pages_citing_the_changed_fact(two_projects):
    store = two_projects
    with_across(store, "concepts:\n  across: [billing]\n")
    assert kbuild(store).exit_code == 0
    assert executed(kbuild(store, "build", "--json")) == []
    (store / "refunds.md").write_text(REFUNDS.replace("above 500 euros", "above 900 euros"))
    ran = executed(kbuild(store, "build", "--json"))
    assert [q for q in ran if q.startswith("concept_page(")] == ['concept_page("auth","multi-factor-authentication-mfa")']
    assert {q.split(",")[1] for q in ran if q.startswith("fact_concepts(")} == {'"billing"'}
    page = (store / "kb/auth/concepts/multi-factor-authentication-mfa.md").read_text()
    assert "above 900 euros" in page and "500" not in page
    assert kbuild(store, "check").exit_code == 0


def test_a_removed_across_entry_or_other_source_takes_its_statements_away(two_projects):
    store = two_projects
    sources = store / "kb/auth/sources.yml"
    listed = sources.read_text()
    with_across(store, "concepts:\n  across: [billing]\n")
    assert kbuild(store).exit_code == 0
    page = store / "kb/auth/concepts/multi-factor-authentication-mfa.md"
    assert "approver" in page.read_text()
    sources.write_text(listed)
    assert kbuild(store).exit_code == 0
    assert "approver" not in page.read_text() and "billing" not in page.read_text()
    with_across(store, "concepts:\n  across: [billing]\n")
    assert kbuild(store).exit_code == 0 and "approver" in page.read_text()
    assert kbuild(store, "remove", "billing", "refunds").exit_code == 0
    assert kbuild(store).exit_code == 0
    assert "approver" not in page.read_text() and "billing" not in page.read_text()
    assert kbuild(store, "check").exit_code == 0


def test_a_project_across_names_that_is_gone_is_one_line_and_the_pages_build_without_it(two_projects):
    store = two_projects
    with_across(store, "concepts:\n  across: [billing]\n")
    assert kbuild(store).exit_code == 0
    import shutil
    shutil.rmtree(store / "kb/billing")
    result = kbuild(store)
    assert result.exit_code == 1
    failed = [line for line in result.output.splitlines() if line.startswith("failed:")]
    assert failed == ["failed: kb/auth/sources.yml: concepts: across names project 'billing', which has no "
                      "kb/billing/sources.yml; take it out of `across` or add the project with `kbuild add billing PATH`"], \
        result.output
    assert "Traceback" not in result.output
    page = (store / "kb/auth/concepts/multi-factor-authentication-mfa.md").read_text()
    assert "approver" not in page and "Staff Handbook" in page
    # the project made again: its statements come back, with no edit of auth's sources.yml
    assert kbuild(store, "add", "billing", "refunds.md").exit_code == 0
    assert kbuild(store).exit_code == 0
    assert "approver" in (store / "kb/auth/concepts/multi-factor-authentication-mfa.md").read_text()


@pytest.mark.parametrize("yaml, says", [
    ("concepts:\n  across: [Billing Team]\n", "concepts: across: project id 'Billing Team' must be"),
    ("concepts:\n  acros: [billing]\n", "concepts: acros: Extra inputs are not permitted"),
    ("concepts: [billing]\n", "concepts: must be a mapping, such as `concepts: {across: [other-project]}`"),
])
def test_an_invalid_concepts_entry_is_one_line_and_the_rest_builds(store, yaml, says):
    with_across(store, yaml)
    (store / "runbook.md").write_text(RUNBOOK.replace("within 24 hours", "within 12 hours"))
    result = kbuild(store)
    assert result.exit_code == 1
    failed = [line for line in result.output.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1 and failed[0].startswith(f"failed: kb/auth/sources.yml: {says}"), result.output
    assert "Traceback" not in result.output
    page = (store / "kb/auth/concepts/multi-factor-authentication-mfa.md").read_text()
    assert "Staff Handbook" in page and "revoked within 12 hours" in page  # the edit made with it is built
