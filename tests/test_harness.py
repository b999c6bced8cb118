"""The harness files (AGENTS.md, CLAUDE.md) an agent reads first: kept by the build, checked by CI."""
from __future__ import annotations

from pathlib import Path

from conftest import kbuild


def test_every_harness_file_says_how_to_ask_and_check_fails_on_a_stale_or_edited_block(tmp_path: Path) -> None:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "hours.md").write_text("# Hours\n\nThe shop opens at ten. It closes at six on weekdays.\n")
    assert kbuild(tmp_path, "add", "shop", "hours.md").exit_code == 0
    (tmp_path / "CLAUDE.md").write_text("# Claude\n\nBe brief.\n")
    kbuildfile = tmp_path / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text() + '\nharness_file = ["AGENTS.md", "CLAUDE.md"]\n')
    assert kbuild(tmp_path).exit_code == 0
    for name in ("AGENTS.md", "CLAUDE.md"):
        text = (tmp_path / name).read_text()
        assert 'kbuild context "QUESTION"' in text and "kbuild mcp" in text and "[shop](kb/shop/index.md)" in text
    assert (tmp_path / "CLAUDE.md").read_text().startswith("# Claude\n\nBe brief.\n")  # the person's words stay
    assert kbuild(tmp_path, "check").exit_code == 0

    claude = tmp_path / "CLAUDE.md"
    claude.write_text(claude.read_text().replace("cite those links", "ignore those links"))
    check = kbuild(tmp_path, "check")
    assert check.exit_code == 1 and "CLAUDE.md: its kbuild block is stale or was edited by hand" in check.output
    (tmp_path / "hours.md").write_text("# Hours\n\nThe shop opens at nine. It closes at six on weekdays.\n")
    assert kbuild(tmp_path).exit_code == 0 and kbuild(tmp_path, "check").exit_code == 0  # the build writes it again
    (tmp_path / "AGENTS.md").unlink()
    check = kbuild(tmp_path, "check")
    assert check.exit_code == 1 and "AGENTS.md: does not exist" in check.output


def test_a_harness_file_outside_the_project_is_refused_in_one_line(tmp_path: Path) -> None:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    kbuildfile = tmp_path / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text() + '\nharness_file = "../AGENTS.md"\n')
    result = kbuild(tmp_path)
    assert result.exit_code != 0 and "harness_file must be a file name inside the project" in result.output
    assert "Traceback" not in result.output
