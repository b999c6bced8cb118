"""The command line as a user meets it: output, exit codes, errors that say what to do."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import kbuild
from kbuild.engine.buildlock import BuildLock
from kbuild.store.sources import parse

KBUILDFILE = '''
from kbuild.engine import rule

@rule
async def words(ctx, path):
    return len(ctx.read_text(path).split())

@rule
async def report(ctx, *paths):
    counts = await ctx.query_all([words(p) for p in paths])
    ctx.write("out/report.md", "".join(f"- {p}: {n}\\n" for p, n in zip(paths, counts)))
    return sum(counts)

def targets():
    return [report("a.txt", "b.txt")]
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE)
    (tmp_path / "a.txt").write_text("one two\n")
    (tmp_path / "b.txt").write_text("three\n")
    return tmp_path


def test_build_then_nothing_to_do(project):
    first = kbuild(project)
    assert first.exit_code == 0, first.output
    assert first.output.startswith("3 ran, 0 reused")
    assert (project / "out/report.md").read_text() == "- a.txt: 2\n- b.txt: 1\n"
    assert kbuild(project).output.startswith("0 ran, 3 reused")
    assert kbuild(project, "status").output == "up to date: nothing would run\n"


def test_dry_run_and_explain_say_why(project):
    kbuild(project)
    (project / "b.txt").write_text("three four\n")
    plan = kbuild(project, "build", "--dry-run")
    assert 'words("b.txt"): input b.txt changed' in plan.output
    assert (project / "out/report.md").read_text() == "- a.txt: 2\n- b.txt: 1\n"  # ran nothing
    explained = kbuild(project, "explain", "out/report.md")
    assert 'would run: words("b.txt") is out of date' in explained.output
    assert '* reads words("b.txt")' in explained.output
    report = json.loads(kbuild(project, "build", "--json").output)
    assert sorted(report["executed"]) == ['report("a.txt","b.txt")', 'words("b.txt")']
    assert report["reasons"]['words("b.txt")'] == "b.txt changed"


def test_graph_formats(project):
    kbuild(project)
    assert '"report(\\"a.txt\\",\\"b.txt\\")" -> "words(\\"a.txt\\")";' in kbuild(project, "graph").output
    graph = json.loads(kbuild(project, "graph", "--format", "json", "--no-files").output)
    assert len(graph["edges"]) == 2
    assert "#quot;" in kbuild(project, "graph", "--format", "mermaid").output


def test_a_failed_query_exits_1_and_names_it(project):
    (project / "b.txt").unlink()
    result = kbuild(project)
    assert result.exit_code == 1
    assert 'failed: words("b.txt"): FileNotFoundError' in result.output
    assert "Traceback" not in result.output


def test_errors_in_the_kbuildfile_exit_2_with_a_clear_line(tmp_path):
    result = kbuild(tmp_path)
    assert result.exit_code == 2 and "run `kbuild init`" in result.output
    (tmp_path / "Kbuildfile.py").write_text("x = 1\n")
    assert "must define `def targets():`" in kbuild(tmp_path).output
    (tmp_path / "Kbuildfile.py").write_text("raise ValueError('oops')\n")
    result = kbuild(tmp_path)
    assert result.exit_code == 2 and "failed to run: ValueError: oops" in result.output


def test_a_second_build_exits_3(project):
    with BuildLock(project / ".kbuild"):
        result = kbuild(project)
    assert result.exit_code == 3 and "another kbuild" in result.output


def test_status_names_what_was_never_built(project):
    assert 'report("a.txt","b.txt"): not built yet' in kbuild(project, "status").output
    assert json.loads(kbuild(project, "status", "--json").output)["new"] == ['report("a.txt","b.txt")']
    kbuild(project)
    assert kbuild(project, "status").output == "up to date: nothing would run\n"


def test_status_groups_what_is_stale_by_what_changed(project):
    kbuild(project)
    (project / "b.txt").write_text("three four\n")
    out = kbuild(project, "status").output
    assert 'words("b.txt"): its input b.txt changed' in out
    assert "  2 queries stale, 1 pages: out/report.md" in out


def test_clean_during_a_build_waits_its_turn_and_deletes_nothing(project):
    assert kbuild(project).exit_code == 0
    (project / ".kbuild/cache/ab").mkdir(parents=True)
    (project / ".kbuild/cache/ab/entry.json").write_text("{}")
    before = sorted(p.relative_to(project).as_posix() for p in (project / ".kbuild").rglob("*"))
    with BuildLock(project / ".kbuild"):  # a build is running
        for args in (["clean"], ["clean", "--cache"]):
            result = kbuild(project, *args)
            assert result.exit_code == 3 and "another kbuild" in result.output, result.output
            assert "Traceback" not in result.output
    assert sorted(p.relative_to(project).as_posix() for p in (project / ".kbuild").rglob("*")) == before
    assert kbuild(project, "clean", "--cache").exit_code == 0
    assert not (project / ".kbuild/cache").exists() and not (project / ".kbuild/state.db").exists()


def test_show_prints_pages_of_the_store_and_nothing_else(project, tmp_path_factory):
    assert kbuild(project).exit_code == 0
    assert kbuild(project, "show", "out/report.md").output.startswith("- a.txt: 2")
    outside = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    outside.write_text("root:x:0:0\n")
    (project / "out/link.md").symlink_to(outside)
    for path in (str(outside), "/etc/passwd", "../" + outside.parent.name + "/secret.txt", "out/link.md"):
        result = kbuild(project, "show", path)
        assert result.exit_code == 2 and "root:x" not in result.output, (path, result.output)
        assert "is not a page of the store" in result.output


@pytest.mark.parametrize("damage", ["not a database", "malformed"])
def test_a_damaged_state_is_rebuilt_from_the_lock_with_one_warning(project, damage):
    assert kbuild(project).exit_code == 0
    built = {p: (project / p).read_bytes() for p in ("kbuild.lock", "out/report.md")}
    state = project / ".kbuild/state.db"
    data = state.read_bytes()
    keep = 0 if damage == "not a database" else 100  # SQLite's header alone survives
    state.write_bytes(data[:keep] + bytes(range(7, 250)) * (len(data) // 243 + 1))
    doctor = kbuild(project, "doctor")
    assert doctor.exit_code == 1 and "FAIL  .kbuild/state.db is damaged" in doctor.output, doctor.output
    assert kbuild(project, "status").output == "up to date: nothing would run\n"  # from the lock alone
    result = kbuild(project)
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert result.output.count("warning: the local state .kbuild/state.db is damaged") == 1
    assert "rebuilt from kbuild.lock" in result.output
    assert {p: (project / p).read_bytes() for p in built} == built
    assert kbuild(project).output.startswith("0 ran, 3 reused")
    assert "PASS  .kbuild/state.db: readable" in kbuild(project, "doctor").output


def test_doctor_fails_a_lock_with_merge_conflict_markers(project):
    assert kbuild(project).exit_code == 0
    lock = project / "kbuild.lock"
    lines = lock.read_text().splitlines(keepends=True)
    lock.write_text("".join(["<<<<<<< HEAD\n", *lines, "=======\n", *lines, ">>>>>>> theirs\n"]))
    doctor = kbuild(project, "doctor")
    assert doctor.exit_code == 1, doctor.output
    assert any(line.startswith("FAIL") and "kbuild.lock has merge conflict markers (line 1)" in line
               for line in doctor.output.splitlines()), doctor.output
    result = kbuild(project)
    assert result.exit_code == 2 and "kbuild.lock has merge conflict markers" in result.output
    assert "Traceback" not in result.output


def test_logs_reads_a_call_log_written_by_an_older_kbuild(project):
    """A log from before `request` held the whole body (schema 1) is migrated, not refused."""
    import sqlite3

    (project / ".kbuild").mkdir()
    db = sqlite3.connect(project / ".kbuild/logs.db")
    db.execute("""CREATE TABLE calls (id INTEGER PRIMARY KEY, at TEXT, task TEXT, query TEXT, model TEXT,
                  cache_hit INTEGER, latency_ms REAL, tokens_in INTEGER, tokens_out INTEGER, cost REAL,
                  error TEXT, request TEXT, response TEXT)""")
    db.execute("INSERT INTO calls VALUES (1, '2025-01-01T00:00:00', 'read', 'fact(x)', 'm', 0, 12.0, 30, 4, 0, "
               "NULL, ?, 'the answer')", (json.dumps([{"role": "user", "content": "the question"}]),))
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    result = kbuild(project, "logs", "--json")
    assert result.exit_code == 0, result.output
    call = json.loads(result.output)
    assert json.loads(call["request"]) == {"messages": [{"role": "user", "content": "the question"}]}
    assert call["cost"] is None  # 0 was logged for "no price known"
    full = kbuild(project, "logs", "--full").output
    assert "[user]\n    the question" in full and "$?" in full


def test_commands_that_need_a_knowledge_base_say_a_kbuildfile_has_none(project):
    (project / "notes.md").write_text("# Notes\n")
    for args in (["add", "shop", "notes.md"], ["view", "add", "shop", "v", "--about", "x"]):
        result = kbuild(project, *args)
        assert result.exit_code == 2 and "defines no knowledge base" in result.output, result.output


def test_the_command_list_says_what_each_command_says_of_itself():
    """`kbuild --help` lists the commands without importing them: each line must be the command's own."""
    import importlib

    from kbuild.cli import COMMANDS

    for name, (module, attr, line) in COMMANDS.items():
        command = getattr(importlib.import_module(f"kbuild.cli.{module}"), attr)
        assert command.name == name and command.get_short_help_str(limit=1000) == line, name


def test_help_and_version_answer_without_the_engine():
    import subprocess
    import sys

    for args in (["--help"], ["-h"], ["--version"]):
        code = ("import sys; from kbuild.cli import main\n"
                f"try: main({args!r})\nexcept SystemExit: pass\n"
                "print('asyncio' in sys.modules, 'kbuild.rules' in sys.modules)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip().endswith("False False"), (args, out)


def test_no_color_and_force_color_are_honoured(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kbuild.cli import main

    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    monkeypatch.setenv("NO_COLOR", "1")
    plain = CliRunner().invoke(main, ["-C", str(tmp_path), "doctor"], color=True)  # as on a terminal
    assert "PASS" in plain.output and "\x1b[" not in plain.output
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    coloured = CliRunner().invoke(main, ["-C", str(tmp_path), "doctor"], color=False)  # as into a pipe
    assert "\x1b[" in coloured.output


def test_global_flags_are_taken_after_the_command_too(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 3 tries.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    quiet = kbuild(tmp_path, "build", "-q")
    assert quiet.exit_code == 0 and "ran," not in quiet.output  # as `kbuild -q build`
    assert kbuild(tmp_path, "search", "limit", "--debug").exit_code == 0
    assert kbuild(tmp_path, "show", "--", "-q").exit_code != 0  # after --, a word is the command's


def test_explain_and_graph_take_page_paths_from_where_they_run(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kbuild.cli import main

    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 3 tries.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    assert kbuild(tmp_path, "explain", "./kb/p/facts/a/index.md").exit_code == 0
    monkeypatch.chdir(tmp_path / "kb/p")
    inside = CliRunner().invoke(main, ["explain", "facts/a/index.md"])
    assert inside.exit_code == 0 and "source_index" in inside.output, inside.output
    assert CliRunner().invoke(main, ["graph", "--no-files", "./facts/a/index.md"]).exit_code == 0
    missing = CliRunner().invoke(main, ["explain", "facts/a/nothing.md"])
    assert missing.exit_code == 2 and "facts/a/nothing.md is neither" in missing.output


def test_a_long_build_in_a_log_prints_plain_progress_lines(monkeypatch):
    import io

    from kbuild.services import progress

    log = io.StringIO()  # not a terminal
    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    bar = progress.Progress(enabled=True, total=2, stream=log)
    for n in range(3):
        bar("done", f"fact(\"p\",\"a\",\"{n}\")")
    bar("fail", "fact(\"p\",\"a\",\"x\")")
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("kbuild: 1 of 2 queries, 0 failed") and "now fact(" in lines[0]
    assert " s left; " in lines[0] and " s left" not in lines[2]  # an estimate while there is a total
    assert lines[2].startswith("kbuild: 3 queries, 0 failed")  # more ran than counted: no total, not 150%
    assert lines[3].startswith("kbuild: 4 queries, 1 failed")
    quiet = io.StringIO()
    progress.Progress(enabled=False, total=2, stream=quiet)("done", "q")
    assert quiet.getvalue() == ""


def test_status_expects_no_model_call_of_the_offline_backend(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 3 tries.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nThe limit is 4 tries.\n")
    status = kbuild(tmp_path, "status").output
    assert "a.md changed" in status and "model calls: none expected" in status


# -- habits a new user brings (issue 51) ------------------------------------------------------------

def test_a_mistyped_command_gets_the_nearest_ones():
    from click.testing import CliRunner

    from kbuild.cli import main

    result = CliRunner().invoke(main, ["buidl"])
    assert result.exit_code == 2 and "Did you mean 'build'?" in result.output, result.output
    assert "Did you mean" not in CliRunner().invoke(main, ["xyzzy"]).output  # nothing near: no guess


def test_help_names_a_command_and_groups_the_list_without_plumbing():
    from click.testing import CliRunner

    from kbuild.cli import main

    assert CliRunner().invoke(main, ["help", "add"]).output == CliRunner().invoke(main, ["add", "--help"]).output
    listing = CliRunner().invoke(main, ["--help"]).output
    assert "Build and check:" in listing and "Read the store:" in listing
    assert "merge-lock" not in listing and "…" not in listing  # plumbing hidden; no line cut short
    assert CliRunner().invoke(main, ["merge-lock", "--help"]).exit_code == 0  # still there for git


def test_global_options_are_taken_after_the_command(project):
    from click.testing import CliRunner

    from kbuild.cli import main

    assert kbuild(project).exit_code == 0
    for args in (["status", "-C", str(project)], ["status", f"--directory={project}"],
                 ["status", "-f", str(project / "Kbuildfile.py"), "-C", str(project)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and result.output.startswith("up to date"), (args, result.output)


def test_check_takes_json_as_the_other_commands_do(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    result = kbuild(tmp_path, "check", "--json")
    assert json.loads(result.output)["schema"] == "kbuild.check/1", result.output
    assert kbuild(tmp_path, "check", "--json", "--format", "sarif").exit_code == 2


def test_logs_and_cache_as_json_also_when_empty(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    logs = kbuild(tmp_path, "logs", "--json")
    assert logs.exit_code == 0 and logs.output == ""  # JSON Lines: no call, no line
    cache = json.loads(kbuild(tmp_path, "cache", "--json").output)
    assert cache["schema"] == "kbuild.cache/1" and cache["answers"] == 0


def test_add_lists_several_paths_or_a_folder_and_goes_on_past_one_that_fails(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "docs/sub").mkdir(parents=True)
    (tmp_path / "docs/.drafts").mkdir()
    (tmp_path / "docs/a.md").write_text("# A\n\nAlpha.\n")
    (tmp_path / "docs/sub/b.txt").write_text("Beta.\n")
    (tmp_path / "docs/sub/a.md").write_text("# A again\n")  # the same id as docs/a.md
    (tmp_path / "docs/.drafts/c.md").write_text("# draft\n")
    (tmp_path / "docs/old.odt").write_bytes(b"PK")  # a format kbuild refuses: not listed
    (tmp_path / "docs/bad.md").symlink_to(tmp_path / "missing.md")  # not a file: one line
    (tmp_path / "x.md").write_text("# X\n")
    result = kbuild(tmp_path, "add", "p", "docs", "x.md", "docs/bad.md")
    assert result.exit_code == 2 and "docs/bad.md" in result.output and "1 of 5" in result.output, result.output
    listed = parse((tmp_path / "kb/p/sources.yml").read_bytes(), "x").sources
    assert {s.path: s.id for s in listed} == {"docs/a.md": "a", "docs/sub/a.md": "sub-a", "docs/sub/b.txt": "b",
                                             "x.md": "x"}
    assert kbuild(tmp_path, "add", "p", "docs/a.md", "x.md", "--id", "one").exit_code == 2


def test_add_gives_a_document_whose_name_is_taken_a_free_id_and_lists_nothing_twice(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/report.md").write_text("# Report\n\nAlpha.\n")
    (tmp_path / "docs/report.txt").write_text("Beta.\n")  # a folder of documents, two named alike
    result = kbuild(tmp_path, "add", "p", "docs")
    assert result.exit_code == 0 and "added report-txt" in result.output, result.output
    again = kbuild(tmp_path, "add", "p", "docs")  # a folder added again: what is listed stays once
    assert again.exit_code == 0 and again.output.count("already listed") == 2, again.output
    assert [s.id for s in parse((tmp_path / "kb/p/sources.yml").read_bytes(), "x").sources] == ["report", "report-txt"]
    named = kbuild(tmp_path, "add", "p", "docs/report.md", "--id", "report-txt")
    assert named.exit_code == 0 and "already listed" in named.output  # the same file, whatever its name
    (tmp_path / "other.md").write_text("# Other\n")
    taken = kbuild(tmp_path, "add", "p", "other.md", "--id", "report")  # a name given is never changed
    assert taken.exit_code == 2 and "already lists source 'report'" in taken.output
    assert kbuild(tmp_path).exit_code == 0


def test_add_of_the_project_root_lists_its_documents_not_the_builds_own_files(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "notes.md").write_text("# Notes\n\nAlpha.\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/Kbuildfile.py").write_text("x = 1\n")  # another folder's: a document like any
    assert kbuild(tmp_path).exit_code == 0 and (tmp_path / "kbuild.lock").exists()
    assert kbuild(tmp_path, "check", "--record").exit_code == 0
    assert kbuild(tmp_path, "add", "p", ".").exit_code == 0
    listed = [s.path for s in parse((tmp_path / "kb/p/sources.yml").read_bytes(), "x").sources]
    assert listed == ["notes.md", "tools/Kbuildfile.py"]


def test_the_offline_notice_is_said_once_per_store(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nAlpha.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    assert "no model configured" in kbuild(tmp_path).output
    (tmp_path / "a.md").write_text("# A\n\nAlpha and beta.\n")
    assert "no model configured" not in kbuild(tmp_path).output
    assert kbuild(tmp_path, "clean").exit_code == 0
    assert "no model configured" in kbuild(tmp_path).output  # a store that forgot it hears it again
