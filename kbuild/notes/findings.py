"""`kbuild check` over notes: a note that does not parse, a note whose evidence changed (with
--strict), and a page that still carries a forgotten note's words. kbuild.cli.check hands in
the pages the store's check read (kbuild.checks.store), which knows nothing of notes."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..checks.store import Finding
from ..store.layout import Store
from .forgetting import Forgotten, all_tombstones
from .note import NoteError, changed_evidence, effective_status, parse


def note_findings(root: Path, store: Store, projects: Iterable[str], pages: Mapping[str, bytes],
                  strict: bool) -> list[Finding]:
    """Findings about the notes of `projects`; `pages`: every page's bytes by path (what the
    check read already), scanned for forgotten words along with the store's other text files."""
    findings: list[Finding] = []
    projects = list(projects)
    for project in projects:
        for path in sorted((root / store.notes_dir(project)).glob("*.md")):
            rel = path.relative_to(root).as_posix()
            try:
                header = parse(path.read_bytes(), rel).header
            except NoteError as exc:
                findings.append(Finding(rel, str(exc), "fix its front matter, or write the note with `kbuild learn`",
                                        "bad-note", rel))
                continue
            changed = changed_evidence(root, header)
            if strict and effective_status(header, changed) == "needs-review":
                findings.append(Finding(rel, f"needs review: its evidence {', '.join(changed)} changed since it was "
                                             "written", f"re-read it, then `kbuild confirm {project}/{header.id}` "
                                                        "(or supersede or withdraw it with `kbuild learn`)",
                                        "needs-review", rel))
        for kept in sorted((root / store.notes_dir(project) / "conflicts").glob("*.md")):
            rel = kept.relative_to(root).as_posix()
            findings.append(Finding(rel, "another version of a note, kept by `kbuild import` for a person to decide",
                                    f"compare it with {store.note(project, kept.name.split('.', 1)[0])}, supersede or "
                                    f"append with `kbuild learn`, then rm {rel}", "import-conflict", rel))
    forgotten = {p: Forgotten(s for t in found for s in t.sentences)
                 for p, found in all_tombstones(root, store, projects).items()}
    if not any(forgotten.values()):
        return findings
    for project, words in forgotten.items():
        folder = root / store.project(project)
        for file in sorted(folder.rglob("*")):
            rel = file.relative_to(root).as_posix()
            if not file.is_file() or rel == store.tombstones(project) or file.suffix in (".png", ".npy", ".pdf"):
                continue
            data = pages.get(rel)
            if data is None:
                try:
                    data = file.read_bytes()
                except OSError:
                    continue
            if words.carried_by(data.decode("utf-8", errors="replace")):
                findings.append(Finding(rel, "still carries the words of a forgotten note", "kbuild (it removes or "
                                        "rebuilds every page built on the note)", "forgotten-text", rel))
    return findings
