"""A spec built offline from a source whose limits have units, whose sections have numbers, and
whose rules are stated twice (issue 53, fault 3): every limit tested at its edge with its unit, no
section number read as a limit, no requirement twice."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import kbuild

POLICY = """# Account Policy

## 4 Password reset

Password reset links SHALL expire within 5 working days. Passwords MUST be at least 12 characters long.

## 5 Sessions

### 5.1 Session handling

Sessions MUST time out after 30 minutes of inactivity. See Section 4 for resets; as § 3.2 says, uploads MUST NOT exceed 10 MB.

## 6 Summary of the rules

Password reset links SHALL expire within 5 working days. Passwords MUST be at least 12 characters long.
Sessions MUST time out after 30 minutes of inactivity.
"""


def built_spec(root: Path, document: str, about: str, small_facts: bool = False) -> str:
    """The spec of a view on `about` over one document, built offline in `root`."""
    assert kbuild(root, "init", str(root)).exit_code == 0
    if small_facts:  # a section each, so that a rule restated is in another fact
        kbuildfile = root / "Kbuildfile.py"
        kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000", "floor_tokens=15, cap_tokens=40"))
    (root / "document.md").write_text(document)
    assert kbuild(root, "add", "p", "document.md").exit_code == 0
    assert kbuild(root, "view", "add", "p", "rules", "--about", about).exit_code == 0
    assert kbuild(root, "spec", "add", "p", "rules-spec", "--view", "rules").exit_code == 0
    result = kbuild(root)
    assert result.exit_code == 0, result.output
    return (root / "kb/p/artifacts/specs/rules-spec.md").read_text()


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    return built_spec(tmp_path_factory.mktemp("specs"), POLICY, "limits", small_facts=True)


def requirements(spec: str) -> dict[str, str]:
    """Each requirement's statement, with the acceptance criterion under it."""
    found = re.findall(r"^\*\*R\d+\.\*\* (.*?) \(\[.*?\n\n- Acceptance: (.*)$", spec, flags=re.M)
    return dict(found)


def test_a_limit_is_tested_at_its_edge_with_its_unit(spec):
    found = requirements(spec)
    assert "at 5 working days it holds; at 6 working days it fails" in \
        found["Password reset links SHALL expire within 5 working days."]
    assert "at 12 characters it holds; at 11 characters it fails" in found["Passwords MUST be at least 12 characters long."]
    assert "at 29 minutes it does not apply yet; at 30 minutes it applies" in \
        found["Sessions MUST time out after 30 minutes of inactivity."]


def test_a_section_number_is_never_read_as_a_limit(spec):
    uploads = requirements(spec)["See Section 4 for resets; as § 3.2 says, uploads MUST NOT exceed 10 MB."]
    assert uploads.startswith("Given uploads; ")
    assert uploads.endswith("(at 10 MB it holds; at 11 MB it fails).")


def test_no_requirement_is_stated_twice(spec):
    statements = re.findall(r"^\*\*R\d+\.\*\* (.*?) \(\[", spec, flags=re.M)
    assert len(statements) == len(set(statements)) == 4, statements
    reset = next(line for line in spec.splitlines() if "within 5 working days" in line)
    # the view states the restated rule once, where it first stands (its first fact), and the spec
    # writes it once from there
    assert len(re.findall(r"\]\(\.\./\.\./facts/", reset)) >= 1, reset


@pytest.mark.parametrize("first, second, same", [
    ("Passwords MUST be at least 12 characters long.", "Passwords MUST be at least 12 characters long.", True),
    ("Password reset links SHALL expire within 5 working days.", "password reset links MUST expire within 5 working days", True),
    ("Passwords MUST be at least 12 characters long.", "All passwords MUST be at least 12 characters.", True),
    # another limit, strength or direction is another obligation
    ("Passwords MUST be at least 12 characters long.", "Passwords MUST be at least 8 characters long.", False),
    ("Passwords MUST be at least 12 characters long.", "Passwords SHOULD be at least 12 characters long.", False),
    ("Passwords MUST be at least 12 characters long.", "Passwords MUST be at most 12 characters long.", False),
    ("Tokens MUST be checked before use.", "Tokens MUST be checked after use.", False),
    ("Tokens MUST be checked before use.", "Tokens MUST be checked.", False),
    ("The server MUST log each request.", "The client MUST log each request.", False),
])
def test_a_restated_requirement_is_the_same_obligation(first, second, same):
    from kbuild.text.obligations import same_obligation

    assert same_obligation(first, second) is same


GUIDE = """# Login Guide

## Logins

The counter of failed logins should be associated with the account itself, not the source IP address.
Accounts must be locked for 15 minutes after 10 failed logins. It should be noted that a lockout
can be abused to keep a user out. Login passwords must be at least 8 characters long. Which hash
should we use for login passwords? Argon2id is the usual answer.
"""


def test_a_guide_without_capital_keywords_gets_a_spec_of_its_plain_rules(tmp_path: Path):
    """The OWASP cheat sheets write "should" and "must" in lower case: a spec from their views
    was always "a gap", its view full of rules."""
    found = requirements(built_spec(tmp_path, GUIDE, "logins"))
    assert set(found) == {
        "The counter of failed logins should be associated with the account itself, not the source IP address.",
        "Accounts must be locked for 15 minutes after 10 failed logins.",
        "Login passwords must be at least 8 characters long."}, found
    assert "(at 8 characters it holds; at 7 characters it fails)" in found["Login passwords must be at least 8 characters long."]
