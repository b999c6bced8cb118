"""`kbuild check`: is the committed store up to date and grounded? No model, no network, no .kbuild/.

Everything is computed from the working tree and the lock: staleness by verifying the recorded
graph against the files as they are (the engine's dry run), hand edits by the pages' hashes,
links by reading the pages, grounding by the verdicts the build recorded with each page's hash.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..engine import Change, Engine
from ..engine.files import TEMP_SUFFIX
from ..engine.hashing import hash_bytes
from .links import broken_links_in
from .secrets import find_secrets



@dataclass(frozen=True)
class Finding:
    page: str
    reason: str
    fix: str


def check_store(engine: Engine, kb: Any | None) -> list[Finding]:
    root = engine.root
    grounded = set(kb.grounded_rules) if kb is not None else set()
    inspection = engine.inspect()
    memos, stale = inspection.memos, inspection.stale
    findings: list[Finding] = []
    outputs = {path: qid for qid, memo in memos.items() for path in memo.outputs}

    for why in inspection.refused.values():
        findings.append(Finding(engine.lock_path.name, why, "take kbuild.lock from a commit you trust, then run `kbuild`"))

    for qid, (reason, _) in sorted(stale.items()):
        memo = memos.get(qid)
        if memo is None:
            continue  # a query nobody has built: reported below as what it is (a source, a view)
        for path in sorted(memo.outputs):
            if not path.endswith(".md"):
                continue
            if reason.kind is Change.OUTPUT_EDITED and reason.subject == path:
                if (root / path).exists():
                    findings.append(Finding(path, "edited by hand: its content differs from the lock",
                                            f"git checkout -- {path}  (or `kbuild` to write it again)"))
                else:
                    findings.append(Finding(path, "missing: the lock says it was built", "kbuild"))
            else:
                findings.append(Finding(path, f"stale: {reason.sentence}", "kbuild"))

    # Each page is read once, for its links, its secrets and its grounding verdict; link targets
    # are looked up once however many pages link to them (every fact links to its index).
    exists: dict[str, bool] = {}
    store_root = root / (kb.store.root if kb else "")
    page_hashes: dict[str, str] = {}
    quoting_code = _quoting_code(kb) if kb else set()
    for path, qid in sorted(outputs.items()):
        if not path.endswith(".md"):
            continue
        try:
            data = (root / path).read_bytes()
        except FileNotFoundError:
            continue
        page_hashes[path] = hash_bytes(data)
        if "/raw/" in path:
            continue
        text = data.decode("utf-8", errors="replace")
        code = path.rsplit("/", 1)[0] in quoting_code
        for problem in broken_links_in(text, root / path, store_root, exists, code=code):
            findings.append(Finding(path, problem, "kbuild (or fix the page's source)"))
        # The whole page, quotes and code included: only raw/ keeps a source's words as they were.
        for kind in sorted(set(find_secrets(text))):
            findings.append(Finding(path, f"holds what looks like {kind}", "kbuild (it redacts), and rotate the secret"))

    for qid, memo in sorted(memos.items()):
        if memo.rule not in grounded:  # the application's pages whose statements must be grounded in their sources
            continue
        verdict = memo.notes.get("grounding")
        for path in memo.outputs:
            current = page_hashes.get(path)
            if current is None:
                file = root / path
                if not file.exists():
                    continue
                current = hash_bytes(file.read_bytes())
            if not isinstance(verdict, dict) or not verdict.get("passed") or verdict.get("page") != current:
                findings.append(Finding(path, "no passing grounding verdict for its current content", "kbuild"))

    if kb is not None:
        findings += _not_built(kb, memos)
        findings += _orphans(root, kb.store.root, set(outputs))
    return _unique(findings)


def _quoting_code(kb: Any) -> set[str]:
    """The facts folders of sources that are code, whose quoted words hold no links: in code,
    `handlers[kind](event)` is a call."""
    from ..convert.formats import extension, text_kind

    folders = set()
    for project in kb.projects():
        for original in (kb.root / kb.store.project(project) / "raw").glob("*/original.*"):
            if text_kind(extension(original.name)) == "code":
                folders.add(kb.store.facts_dir(project, original.parent.name))
    return folders


def _not_built(kb: Any, memos: dict[str, Any]) -> list[Finding]:
    from ..engine.rule import query_id
    from ..store.sources import SourcesError, parse

    findings = []
    for project in kb.projects():
        path = kb.store.sources_file(project)
        try:
            listing = parse((kb.root / path).read_bytes(), path)
        except (SourcesError, OSError) as exc:
            findings.append(Finding(path, str(exc), f"fix {path}"))
            continue
        for problem in listing.problems:
            findings.append(Finding(path, problem, f"fix {path}"))
        for source in listing.sources:
            if query_id("source_index", (project, source.id)) not in memos:
                findings.append(Finding(kb.store.source_index(project, source.id),
                                        f"not built: source {source.id} is listed in {path}", "kbuild"))
        for view in listing.views:
            if query_id("view_page", (project, view.name)) not in memos:
                findings.append(Finding(f"{kb.store.project(project)}/artifacts/views/{view.name}.md",
                                        f"not built: view {view.name} is requested in {path}", "kbuild"))
        for spec in listing.specs:
            if query_id("spec_page", (project, spec.name)) not in memos:
                findings.append(Finding(f"{kb.store.project(project)}/artifacts/specs/{spec.name}.md",
                                        f"not built: spec {spec.name} is requested in {path}", "kbuild"))
    return findings


def _orphans(root: Path, store_root: str, produced: set[str]) -> list[Finding]:
    findings = []
    for file in sorted((root / store_root).rglob("*")):
        rel = file.relative_to(root).as_posix()
        if file.is_symlink():  # kbuild writes only regular files: a link here is someone else's
            findings.append(Finding(rel, "a symlink: a build must never write through it to where it points",
                                    f"rm {rel}  (then `kbuild` writes the page again)"))
            continue
        if not file.is_file() or "/raw/" in f"/{rel}" or file.name == "sources.yml" or rel in produced:
            continue
        if file.name.endswith(TEMP_SUFFIX):
            findings.append(Finding(rel, "a temporary file left by an interrupted build", f"rm {rel}"))
        else:
            findings.append(Finding(rel, "orphan: no rule produces this page", f"rm {rel}"))
    return findings


def _unique(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))


def as_dicts(findings: list[Finding]) -> list[dict[str, str]]:
    return [asdict(f) for f in findings]
