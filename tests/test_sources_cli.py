"""Listing and unlisting sources, views and specs as the README's Quick start does."""
from __future__ import annotations

from pathlib import Path

from conftest import kbuild


def test_a_file_outside_the_project_is_copied_in_and_built(tmp_path: Path) -> None:
    project, docs = tmp_path / "myproject", tmp_path / "docs"
    docs.mkdir()
    (docs / "requirements.md").write_text("# Requirements\n\nRefunds are allowed within 90 days.\n")
    assert kbuild(tmp_path, "init", str(project)).exit_code == 0
    added = kbuild(project, "add", "payments", str(docs / "requirements.md"))
    assert added.exit_code == 0 and "copied" in added.output and "sources/requirements.md" in added.output
    assert (project / "sources/requirements.md").read_bytes() == (docs / "requirements.md").read_bytes()
    assert "path: sources/requirements.md" in (project / "kb/payments/sources.yml").read_text()
    assert kbuild(project).exit_code == 0 and kbuild(project, "check").exit_code == 0
    (docs / "requirements.md").write_text("# Requirements\n\nSomething else.\n")  # another file, same name
    again = kbuild(project, "add", "other", str(docs / "requirements.md"))
    assert again.exit_code == 2 and "exists and is another file" in again.output


def test_remove_takes_a_source_view_or_spec_out_and_the_build_removes_its_pages(tmp_path: Path) -> None:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    for name in ("a", "b"):
        (tmp_path / f"{name}.md").write_text(f"# {name.upper()}\n\nThe shop MUST open at {name} ten.\n")
        assert kbuild(tmp_path, "add", "p", f"{name}.md").exit_code == 0
    sources = tmp_path / "kb/p/sources.yml"
    sources.write_text("# our sources\n" + sources.read_text())
    assert kbuild(tmp_path, "view", "add", "p", "hours", "--about", "opening hours").exit_code == 0
    assert kbuild(tmp_path, "spec", "add", "p", "hours-api", "--view", "hours").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    assert (tmp_path / "kb/p/facts/b/index.md").exists() and (tmp_path / "kb/p/artifacts/specs/hours-api.md").exists()
    assert kbuild(tmp_path, "spec", "remove", "p", "hours-api").exit_code == 0
    assert kbuild(tmp_path, "view", "remove", "p", "hours").exit_code == 0
    assert kbuild(tmp_path, "remove", "p", "b").exit_code == 0
    assert sources.read_text().startswith("# our sources\n")  # the person's comment stays
    assert kbuild(tmp_path).exit_code == 0
    assert not (tmp_path / "kb/p/facts/b").exists() and not (tmp_path / "kb/p/artifacts/specs/hours-api.md").exists()
    assert not (tmp_path / "kb/p/artifacts/views/hours.md").exists() and (tmp_path / "kb/p/facts/a/index.md").exists()
    assert kbuild(tmp_path, "check").exit_code == 0
    gone = kbuild(tmp_path, "remove", "p", "b")
    assert gone.exit_code == 2 and "lists no source 'b'" in gone.output


def test_a_view_across_a_project_that_does_not_exist_is_refused_when_asked_for(tmp_path: Path) -> None:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nText.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    refused = kbuild(tmp_path, "view", "add", "p", "v", "--about", "x", "--across", "nowhere")
    assert refused.exit_code == 2 and "no project 'nowhere'" in refused.output
    assert "views:" not in (tmp_path / "kb/p/sources.yml").read_text()


def test_a_typo_in_an_entrys_id_key_fails_that_source_and_removes_nothing(tmp_path: Path) -> None:
    """`- ie: shipping` or `id: Shipping` is a failed entry, never a removal: the source's raw
    copy, its facts and its line in the project's index stay until the entry is fixed."""
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    for name in ("shipping", "returns"):
        (tmp_path / f"{name}.md").write_text(f"# {name.title()}\n\nThe shop MUST handle {name} within ten days.\n")
        assert kbuild(tmp_path, "add", "p", f"{name}.md").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    sources = tmp_path / "kb/p/sources.yml"
    good = sources.read_text()
    kept = ["kb/p/raw/shipping/original.md", "kb/p/facts/shipping/index.md"]
    for typo in ("- ie: shipping", "- id: Shipping", "- Id: shipping"):
        assert "- id: shipping" in good
        sources.write_text(good.replace("- id: shipping", typo))
        built = kbuild(tmp_path)
        assert built.exit_code != 0 and "Traceback" not in built.output, (typo, built.output)
        assert "sources.yml: source shipping:" in built.output, (typo, built.output)
        assert all((tmp_path / path).is_file() for path in kept), typo
        assert "shipping" in (tmp_path / "kb/p/index.md").read_text(), typo
        assert (tmp_path / "kb/p/facts/returns/index.md").is_file()
    sources.write_text(good)
    assert kbuild(tmp_path).exit_code == 0 and kbuild(tmp_path, "check").exit_code == 0
