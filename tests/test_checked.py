"""`kbuild check --record` and kbuild.checked: a fresh clone's check answered by hashing files,
and every change that could change the check's answer sending it the whole way again."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import kbuild
from test_check import KBUILDFILE, PAYMENTS, committed, git, shop

from kbuild import __version__
from kbuild.records import checked
from kbuild.checks import formats
from kbuild.checks import store as store_check

# The command as the installed script runs it, and whether it imported the engine or click.
PROBE = ("import sys; sys.argv = ['kbuild', *sys.argv[1:]]; from kbuild.entry import main\n"
         "try:\n    main()\nexcept SystemExit as e:\n    pass\n"
         "print('IMPORTED', 'click' in sys.modules, 'kbuild.engine' in sys.modules)")


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, bool]:
    """What `kbuild ARGS` printed in `root`, and whether it went past kbuild.entry."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=True)
    out, _, imported = done.stdout.rpartition("IMPORTED ")
    return out, "True" in imported


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    origin = tmp_path_factory.mktemp("checked") / "origin"
    shop(origin)
    result = kbuild(origin, "check", "--record")
    assert result.exit_code == 0, result.output
    return committed(origin)


@pytest.fixture
def clone(origin: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(copy))
    assert not (copy / ".kbuild").exists() and (copy / checked.RECORD).is_file()
    return copy


@pytest.fixture
def full_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry each time the check runs the whole way (in this process)."""
    ran: list[int] = []
    real = store_check.check_store

    def counted(*args, **kwargs):
        ran.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_check, "check_store", counted)
    return ran


def test_a_fresh_clone_with_the_record_passes_without_running_the_kbuildfile(clone, full_checks):
    said, went_on = run(clone, "check")
    assert said == formats.text([]) + "\n" and not went_on
    assert run(clone, "check", "--strict") == (said, True)  # the record is of a check that was not strict
    result = kbuild(clone, "check", "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["ok"] and not full_checks
    assert kbuild(clone, "check").output == said and not full_checks
    assert kbuild(clone, "check", "--full").output == said and full_checks == [1]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status == ""  # neither check wrote anything


def recorded(root: Path) -> dict[str, dict[str, str]]:
    """The record's lines by kind: code place -> hash, file -> hash, folder -> ""."""
    found: dict[str, dict[str, str]] = {"code": {}, "file": {}, "folder": {}}
    for line in (root / checked.RECORD).read_text().splitlines()[5:]:
        kind, _, rest = line.partition(" ")
        digest, _, name = rest.partition(" ") if kind != "folder" else ("", "", rest)
        found[kind][name] = digest
    return found


def test_the_record_names_the_store_the_lock_the_sources_and_the_code(clone):
    head = (clone / checked.RECORD).read_text().splitlines()[:4]
    assert head[1:] == [checked.FORMAT, f"kbuild {__version__}", "strict no"]
    record = recorded(clone)
    assert record["folder"].keys() == {"kb", "kbuild.lock.d"}
    assert {"kb/shop/sources.yml", "kbuild.lock", "payments.md"} <= record["file"].keys()
    code = record["code"]
    assert {"Kbuildfile.py", "glossary-prompt.md", "kbuild.rules:knowledge.py", "kbuild.checks:store.py"} <= code.keys()
    packages: dict[str, str | None] = {}
    for place, digest in code.items():  # each place is found again in this install, by its package
        assert checked.file_hash(checked.code_path(place, str(clone), packages)) == digest, place


def hand_edit(root: Path) -> None:
    page = root / "kb/shop/artifacts/glossary.md"
    page.write_text(page.read_text() + "\nA line of my own.\n")


CHANGES = {
    "hand-edited": hand_edit,
    "orphan": lambda root: (root / "kb/shop/facts/payments/old-page.md").write_text("a page no rule writes"),
    "changed-input": lambda root: (root / "payments.md").write_text(PAYMENTS.replace("90 days", "60 days")),
    "changed-rule": lambda root: (root / "glossary-prompt.md").write_text("# Glossary of terms"),
    "symlink": lambda root: (root / "kb/shop/elsewhere.md").symlink_to(root / "payments.md"),
    "lock-refused": lambda root: (root / "kbuild.lock").write_text(
        (root / "kbuild.lock").read_text().replace('"hash": "', '"hash": "0', 1)),
}


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_a_change_the_record_does_not_hold_sends_the_check_the_whole_way(clone, full_checks, kind):
    CHANGES[kind](clone)
    assert run(clone, "check")[1]
    result = kbuild(clone, "check", "--format", "json")
    assert result.exit_code == 1 and full_checks == [1]
    assert kind in {f["kind"] for f in json.loads(result.stdout)["findings"]} or kind == "lock-refused"


def test_a_change_that_finds_nothing_still_runs_the_check(clone, full_checks, monkeypatch):
    (clone / "Kbuildfile.py").write_text(KBUILDFILE + "\n# a comment\n")
    assert run(clone, "check")[1]
    assert kbuild(clone, "check").exit_code == 0 and full_checks == [1]
    (clone / "Kbuildfile.py").write_text(KBUILDFILE)
    assert not run(clone, "check")[1]
    monkeypatch.setenv("KBUILD_MODEL", "another-model")  # another backend reads the store: every rule changed
    assert run(clone, "check", env={"KBUILD_MODEL": "another-model"})[1]
    assert kbuild(clone, "check").exit_code == 1 and full_checks == [1, 1]


def test_a_record_of_other_code_or_a_conflicted_record_is_not_trusted(clone):
    record = clone / checked.RECORD
    text = record.read_text()
    place, digest = next((p, d) for p, d in recorded(clone)["code"].items() if p.startswith("kbuild.engine:"))
    record.write_text(text.replace(f"code {digest} {place}", f"code {'0' * 32} {place}"))  # another kbuild's engine
    assert run(clone, "check")[1]
    record.write_text(f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> theirs\n")
    assert run(clone, "check")[1]
    record.write_text(text + "<<<<<<< HEAD\n")
    assert run(clone, "check")[1]
    assert kbuild(clone, "check").exit_code == 0  # the store itself is fine
    record.write_text(text)
    assert not run(clone, "check")[1]
    assert not checked.holds(str(clone), "0.0.0", strict=False)  # another version of kbuild


def test_record_writes_only_after_a_pass_and_a_rebuild_needs_a_new_record(clone):
    (clone / "payments.md").write_text(PAYMENTS.replace("90 days", "60 days"))
    before = (clone / checked.RECORD).read_bytes()
    assert kbuild(clone, "check", "--record").exit_code == 1
    assert (clone / checked.RECORD).read_bytes() == before  # a failing check records nothing
    assert kbuild(clone).exit_code == 0
    assert run(clone, "check")[1]  # the record is of the store before the rebuild
    assert kbuild(clone, "check", "--record", "--strict").exit_code == 0
    assert run(clone, "check") == (formats.text([]) + "\n", False)
    assert run(clone, "check", "--strict") == (formats.text([]) + "\n", False)


def test_doctor_says_whether_the_record_holds(clone):
    assert "PASS  kbuild.checked is of these files" in kbuild(clone, "doctor").output
    hand_edit(clone)
    said = kbuild(clone, "doctor").output
    assert "WARN  kbuild.checked is not of these files" in said and "kbuild check --record" in said


def test_a_file_is_hashed_whole_however_large(tmp_path):
    import xxhash

    big = tmp_path / "scan.pdf"
    big.write_bytes(os.urandom(checked.PIECE * 2 + checked.FIRST + 7))
    assert checked.file_hash(str(big)) == xxhash.xxh3_128_hexdigest(big.read_bytes())
    assert checked.file_hash(str(tmp_path)) is None and checked.file_hash(str(tmp_path / "none")) is None


def test_code_is_named_by_its_package_or_its_place_in_the_project(tmp_path):
    packages = {"kbuild": "/site/kbuild", "kbuild.convert": "/site/kbuild/convert"}
    root = str(tmp_path)
    assert checked.code_place("/site/kbuild/convert/pdf/tables.py", root, packages) == "kbuild.convert:pdf/tables.py"
    assert checked.code_place("/site/kbuild/entry.py", root, packages) == "kbuild:entry.py"
    assert checked.code_place(f"{root}/helpers/terms.py", root, packages) == "helpers/terms.py"
    # a library: installed elsewhere, or in a virtual environment inside the project
    assert checked.code_place("/site/pydantic/main.py", root, packages) is None
    assert checked.code_place(f"{root}/.venv/lib/python3.11/site-packages/yaml/main.py", root, packages) is None


def test_a_record_the_entry_found_stale_is_not_verified_again_by_the_command_line(clone, monkeypatch, full_checks):
    from kbuild import entry

    hand_edit(clone)
    looked: list[str] = []
    real = checked._holds
    monkeypatch.setattr(checked, "_holds", lambda *args: looked.append(args[0]) or real(*args))
    monkeypatch.chdir(clone)
    assert not entry.answered(["check"]) and looked == [os.path.realpath(clone)]
    assert kbuild(clone, "check").exit_code == 1 and full_checks == [1]
    assert len(looked) == 1 and checked.refused is None  # the command line took the entry's word, once
    assert kbuild(clone, "check").exit_code == 1 and len(looked) == 2
