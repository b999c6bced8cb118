"""`kbuild check --format json|github|sarif|gitlab` on a real store in a subfolder of a git
repository: one entry per root cause, most important first, paths from the repository's top,
escaped as each format needs, and an answer in the same format when the check cannot run."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import kbuild
from test_check import committed, shop

from kbuild.checks.formats import escape_data, escape_property

NOTES = "notes, v2: 100%.md"
VIEW = "kb/shop/artifacts/views/refunds.md"
FACT = "kb/shop/facts/payments/refunds.md"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose store lives in sub/, built by the offline backend and committed."""
    repo = tmp_path_factory.mktemp("built") / "repo"
    shop(repo / "sub", notes=NOTES)
    return committed(repo)


@pytest.fixture
def repo(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(built, copy, symlinks=True)
    return copy


def broken(repo: Path) -> Path:
    """One stale source, one hand-edited view, one deleted fact (links to it dangle)."""
    store = repo / "sub"
    (store / NOTES).write_text("# Notes\n\nThe shop opens at 10:00. It closes at 18:00 on weekdays.\n")
    view = store / VIEW
    view.write_text(view.read_text() + "\n- Refunds are always free, see [the terms](terms.md).\n")
    (store / FACT).unlink()
    return store


def check(store: Path, fmt: str, **env: str):
    from click.testing import CliRunner

    from kbuild.cli import main

    return CliRunner(env={"GITHUB_STEP_SUMMARY": None, **env}).invoke(main, ["-C", str(store), "check", "--format", fmt])


def annotations(output: str) -> list[tuple[dict[str, str], str]]:
    """Each `::error props::message` line as (its properties, unescaped, and its message, unescaped)."""
    found = []
    for line in output.splitlines():
        match = re.fullmatch(r"::error (.*?)::(.*)", line)
        if match is None:
            continue
        props = dict(p.split("=", 1) for p in match.group(1).split(","))
        found.append(({k: unescape(v) for k, v in props.items()}, unescape(match.group(2))))
    return found


def unescape(value: str) -> str:
    """What GitHub's runner reads from an escaped value (%25 last, so %253A stays %3A)."""
    for escaped, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        value = value.replace(escaped, char)
    return value


def test_escaping_follows_the_workflow_command_rules():
    assert escape_property("notes, v2: 100%.md") == "notes%2C v2%3A 100%25.md"
    assert escape_data("a: b, 100%\r\nnext") == "a: b, 100%25%0D%0Anext"
    assert unescape(escape_property("%3A, 50%: x")) == "%3A, 50%: x"


def test_github_one_annotation_per_root_cause_most_important_first(repo):
    store = broken(repo)
    result = check(store, "github")
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("::")]
    found = annotations(result.stdout)
    assert len(lines) == len(found) == 4  # not one per stale page: GitHub shows 10 a step
    assert [props["title"] for props, _ in found] == [
        "Page edited by hand", "Built page missing", "Dangling link", "Input changed, store not rebuilt"]
    edited, missing, dangling, changed = found

    # Paths from the repository's top: the store lives in sub/.
    assert edited[0]["file"] == f"sub/{VIEW}" and "line" not in edited[0]
    assert "It makes 3 pages stale: sub/kb/shop/artifacts/index.md" in edited[1]
    assert "no passing grounding verdict" in edited[1]  # a consequence of the edit, not an annotation of its own
    assert "Fix (in sub/): `git checkout -- " + VIEW + "`" in edited[1]

    # The deleted fact is one cause: the links to it are listed with it, each with its line.
    assert missing[0]["file"] == f"sub/{FACT}"
    assert re.search(r"sub/kb/shop/facts/payments/index.md:\d+: links to a missing file: refunds.md", missing[1])

    # The link the hand edit added is its own problem, on its line.
    view_lines = (store / VIEW).read_text().splitlines()
    assert dangling[0]["file"] == f"sub/{VIEW}"
    assert "terms.md" in view_lines[int(dangling[0]["line"]) - 1]
    assert "links to a missing file: terms.md" in dangling[1]

    # The changed input itself is annotated, its awkward name escaped, its pages listed in the message.
    assert changed[0]["file"] == f"sub/{NOTES}"
    assert f"file=sub/notes%2C v2%3A 100%25.md,title=Input changed%2C store not rebuilt::" in result.stdout
    assert "It makes 10 pages stale:" in changed[1] and "sub/kb/shop/raw/notes-v2-100/original.md" in changed[1]
    assert "\n" not in lines[-1] and "%0A" in lines[-1]  # one line per annotation, newlines escaped
    assert not re.search(r'\w+\("', result.stdout)  # no query ids (raw("shop",...)) in what a reviewer reads


def test_github_step_summary_has_the_full_table(repo, tmp_path):
    store = broken(repo)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result = check(store, "github", GITHUB_STEP_SUMMARY=str(summary))
    assert result.exit_code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n## kbuild check")  # appended, as GitHub asks
    json_findings = json.loads(check(store, "json").stdout)["findings"]
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| kind")
            and not line.startswith("| problem")]
    assert len(rows) == 4 + len(json_findings)  # the causes, then every finding
    assert f"| Input changed, store not rebuilt | sub/{NOTES} |" in text
    assert "sub/kb/shop/raw/notes-v2-100/original.md" in text


def test_json_schema_kind_cause_page_line_fix(repo):
    store = broken(repo)
    result = check(store, "json")
    assert result.exit_code == 1
    answer = json.loads(result.stdout)
    assert answer["schema"] == "kbuild.check/1" and answer["ok"] is False and answer["ran"] is True
    assert answer["root"] == "sub"
    assert [p["kind"] for p in answer["problems"]] == ["hand-edited", "missing-page", "dangling-link", "changed-input"]
    for finding in answer["findings"]:
        assert set(finding) == {"kind", "cause", "page", "line", "reason", "fix"}
        assert not re.search(r'\w+\("', finding["reason"])
    stale = [f for f in answer["findings"] if f["kind"] == "stale"]
    assert {f["cause"] for f in stale} == {NOTES, VIEW, FACT}
    changed = answer["problems"][-1]
    assert changed["page"] == NOTES and changed["line"] is None
    assert sorted(changed["stale"]) == sorted(f["page"] for f in stale if f["cause"] == NOTES)
    dangling = answer["problems"][2]
    assert isinstance(dangling["line"], int) and dangling["cause"] == f"{VIEW} -> terms.md"


def test_sarif_is_valid_2_1_0(repo):
    store = broken(repo)
    result = check(store, "sarif")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    # The required properties of the SARIF 2.1.0 schema, level by level.
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    assert isinstance(log["runs"], list) and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "kbuild" and isinstance(driver["version"], str)
    rules = driver["rules"]
    assert all(isinstance(r["id"], str) and r["shortDescription"]["text"] for r in rules)
    assert len({r["id"] for r in rules}) == len(rules)
    results = run["results"]
    assert len(results) == 4
    for r in results:
        assert r["message"]["text"]
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        assert r["level"] in {"none", "note", "warning", "error"}
        for location in r["locations"]:
            physical = location["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert uri.startswith("sub/") and not re.search(r"[ ,:]", uri)  # a URI reference, percent-encoded
            if "region" in physical:
                assert isinstance(physical["region"]["startLine"], int) and physical["region"]["startLine"] >= 1
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    assert "sub/notes%2C%20v2%3A%20100%25.md" in uris
    assert [r["ruleId"] for r in results] == ["hand-edited", "missing-page", "dangling-link", "changed-input"]


def test_gitlab_code_quality(repo):
    store = broken(repo)
    result = check(store, "gitlab")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert isinstance(report, list) and len(report) == 4
    for issue in report:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["path"].startswith("sub/")
        assert isinstance(issue["location"]["lines"]["begin"], int) and issue["location"]["lines"]["begin"] >= 1
    assert len({i["fingerprint"] for i in report}) == 4
    assert report[-1]["location"]["path"] == f"sub/{NOTES}"  # plain, in JSON
    again = json.loads(check(store, "gitlab").stdout)
    assert [i["fingerprint"] for i in again] == [i["fingerprint"] for i in report]


def test_a_clean_store_passes_in_every_format(repo, tmp_path):
    store = repo / "sub"
    summary = tmp_path / "summary.md"
    for fmt in ("json", "github", "sarif", "gitlab"):
        result = check(store, fmt, GITHUB_STEP_SUMMARY=str(summary))
        assert result.exit_code == 0, result.output
    assert json.loads(check(store, "json").stdout)["ok"] is True
    assert json.loads(check(store, "sarif").stdout)["runs"][0]["results"] == []
    assert json.loads(check(store, "gitlab").stdout) == []
    assert "Every page is up to date" in summary.read_text()


def test_a_conflicted_lock_still_gives_an_annotation_and_json(repo, tmp_path):
    store = repo / "sub"
    lock = store / "kbuild.lock"
    lock.write_text("<<<<<<< HEAD\n" + lock.read_text() + "=======\n>>>>>>> other\n")
    summary = tmp_path / "summary.md"
    result = check(store, "github", GITHUB_STEP_SUMMARY=str(summary))
    assert result.exit_code == 2
    (props, message), = annotations(result.stdout)
    assert props == {"file": "sub/kbuild.lock", "line": "1", "title": "The check could not run"}
    assert "merge conflict" in message and str(store) not in message
    assert "could not run" in summary.read_text()
    answer = json.loads(check(store, "json").stdout)
    assert answer["schema"] == "kbuild.check/1" and answer["ok"] is False and answer["ran"] is False
    assert answer["findings"] == []
    (problem,) = answer["problems"]
    assert problem["kind"] == "check-failed" and problem["page"] == "kbuild.lock" and problem["line"] == 1
    assert json.loads(check(store, "sarif").stdout)["runs"][0]["results"][0]["ruleId"] == "check-failed"
    assert json.loads(check(store, "gitlab").stdout)[0]["severity"] == "blocker"
    text = check(store, "text")
    assert text.exit_code == 2 and "could not run" in text.output


def test_a_broken_kbuildfile_is_annotated_on_its_line(repo):
    store = repo / "sub"
    kbuildfile = store / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text() + "\ndef broken(:\n")
    line = len(kbuildfile.read_text().splitlines())
    result = check(store, "github")
    assert result.exit_code == 2
    (props, message), = annotations(result.stdout)
    assert props["file"] == "sub/Kbuildfile.py" and props["line"] == str(line)
    assert "SyntaxError" in message
    answer = json.loads(check(store, "json").stdout)
    assert answer["ran"] is False and answer["problems"][0]["page"] == "Kbuildfile.py"


TOP = Path(__file__).parent.parent


def test_the_schema_and_every_kind_are_documented():
    from kbuild.checks.formats import KINDS, SCHEMA

    for doc in ("docs/json.md", "docs/ci.md"):
        text = (TOP / doc).read_text()
        assert all(f"`{kind}`" in text for kind in KINDS), doc
    assert f"## {SCHEMA}" in (TOP / "docs/json.md").read_text()


def test_the_integrations_that_ship_install_kbuild_from_its_repository():
    import yaml

    ci = (TOP / "docs/ci.md").read_text()
    commands = "\n".join(re.findall(r"```(?:yaml|sh)\n(.*?)```", ci, re.S))
    assert "pip install" in commands and not re.search(r"pip install kbuild\b", commands)  # not on PyPI
    assert 'pip install "git+https://github.com/OWNER/kbuild@REF"' in ci and "kbuild-check" in ci
    action = yaml.safe_load((TOP / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert any(s.get("uses", "").startswith("actions/cache@") for s in steps)
    assert any("pip install" in s.get("run", "") and "KBUILD_ACTION_PATH" in s["run"] for s in steps)
    assert steps[-1]["run"].startswith("kbuild check --format") and action["inputs"]["format"]["default"] == "github"
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == "${{ inputs.cache-dir }}"
    assert any("KBUILD_CACHE_DIR" in s.get("run", "") for s in steps)
    hook, recording = yaml.safe_load((TOP / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "kbuild-check" and hook["entry"] == "kbuild check" and hook["pass_filenames"] is False
    assert recording["id"] == "kbuild-check-record" and recording["entry"] == "kbuild check --record"
    assert hook["language"] == recording["language"] == "python" and "kbuild-check-record" in ci


def test_a_refused_lock_entry_is_shown_on_its_line_in_the_lock(repo):
    store = repo / "sub"
    lock = store / "kbuild.lock"
    data = json.loads(lock.read_text())
    qid = sorted(data["queries"])[0]
    data["queries"][qid]["outputs"][".git/HEAD"] = "0" * 32  # a pull request's lock naming a file outside kb/
    lock.write_text(json.dumps(data, indent=1))
    answer = json.loads(check(store, "json").stdout)
    refused = answer["problems"][0]
    assert refused["kind"] == "lock-refused" and refused["page"] == "kbuild.lock"
    assert lock.read_text().splitlines()[refused["line"] - 1].lstrip().startswith(json.dumps(qid))
    (props, _), *_ = annotations(check(store, "github").stdout)
    assert props["file"] == "sub/kbuild.lock" and props["title"] == "Lock entry refused"
