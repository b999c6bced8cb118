"""`kbuild check`: is the committed store up to date and grounded? No model, no network, no .kbuild/.

Everything is computed from the working tree and the lock: staleness by verifying the recorded
graph against the files as they are (the engine's dry run), hand edits by the pages' hashes,
links by reading the pages, grounding by the verdicts the build recorded with each page's hash.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..records.inputs import store_files
from ..engine import Change, Engine, LockError
from ..engine.state import FileRead, Memo, flat
from ..engine.verify import Reason
from ..engine.files import TEMP_SUFFIX
from ..engine.hashing import FAILED, hash_bytes
from ..store.layout import Store
from ..store.sources import AcceptedDisagreement, SourcesError, parse
from .links import missing_links
from .pages import links_of, recorded
from .pages import verdict as page_verdict


@dataclass(frozen=True)
class Finding:
    """One problem of one page (or file). `kind` names the problem (docs/ci.md lists them);
    `cause` is what it comes from, as a person names it (a changed input's path, a hand-edited
    page, "rule glossary"): a stale page has the cause of the change it is built on, so that
    the output formats can show each root cause once with the pages it makes stale; `line` is
    the line of `page` the problem is on, where known (1-based)."""

    page: str
    reason: str
    fix: str
    kind: str = ""
    cause: str = ""
    line: int | None = None


def check_store(engine: Engine, kb: Any | None, named: set[str] | None = None,
                pages_read: dict[str, bytes] | None = None) -> list[Finding]:
    """Every finding of the store's pages and graph. `named` gets every file the lock says the
    graph read or wrote (for kbuild.records.checked); `pages_read` every page's bytes as the
    check read them, for the notes' findings (kbuild.notes.findings) to scan without reading
    them again."""
    root = engine.root
    grounded = set(kb.grounded_rules) if kb is not None else set()
    inspection = engine.inspect(lambda path: path.endswith(".md"))
    memos, stale = inspection.memos, inspection.stale
    pages = {path: data for path, (data, _) in inspection.contents.items()}
    page_hashes = {path: digest for path, (_, digest) in inspection.contents.items()}
    findings: list[Finding] = []
    outputs = {path: qid for qid, memo in memos.items() for path in memo.outputs}
    if named is not None:
        named.update(outputs)
        named.update(read.path for memo in memos.values() for group in memo.deps for read, _ in group
                     if isinstance(read, FileRead))

    for qid, why in inspection.refused.items():
        file, line = _lock_line(engine, qid)
        findings.append(Finding(file, why, f"take {file} from a commit you trust, then run `kbuild`",
                                "lock-refused", f"{file} {qid}", line))

    if inspection.lock_misplaced:
        lock = _shown(engine, engine.lock_path)
        laid_out = "split into a file per project" if engine.lock.split else "one file"
        findings.append(Finding(lock, f"the lock is not laid out as the Kbuildfile says ({laid_out}, split_lock)",
                                f"kbuild, then commit {lock} and {_shown(engine, engine.lock.folder)}/",
                                "lock-layout", lock))

    lock_file = _shown(engine, engine.lock_path)
    for qid, (reason, cause_qid) in sorted(stale.items()):
        memo = memos.get(qid)
        if memo is None:
            continue  # a query nobody has built: reported below as what it is (a source, a view)
        cause_reason = stale[cause_qid][0]
        read = stale.get(cause_reason.subject) if cause_reason.kind is Change.DEPENDENCY_CHANGED else None
        if read is not None and stale[read[1]][0].kind is Change.MERGED:  # it read what the merge chose: the merge's
            cause_qid, cause_reason = read[1], stale[read[1]][0]
        kind, cause, why, first = _root(cause_reason, memos.get(cause_qid), root, lock_file)
        if first is not None:  # the change itself: the input, the rule
            findings.append(first)
        for path in sorted(memo.outputs):
            if not path.endswith(".md"):
                continue
            if reason.kind is Change.OUTPUT_EDITED and reason.subject == path:
                if (root / path).exists():
                    findings.append(Finding(path, "edited by hand: its content differs from the lock",
                                            f"`git checkout -- {path}` (or `kbuild build --force` to write it again, "
                                            "keeping its text in .kbuild/overwritten/)",
                                            "hand-edited", path))
                else:
                    findings.append(Finding(path, "missing: the lock says it was built", "kbuild", "missing-page", path))
            else:
                findings.append(Finding(path, f"stale: {why}", "kbuild", "stale", cause))

    # Each page is read once, for its hash, its links, its secrets and its grounding verdict (the
    # inspection read it); a page whose rule recorded the verdict of its links and secrets with
    # its hash is not scanned again while it has that hash, and the rest are scanned on both cores
    # where there are enough of them. Link targets are looked up once however many pages link to
    # them (every fact links to its index).
    exists: dict[str, bool] = {}
    store_root = root / (kb.store.root if kb else "")
    quoting_code = _quoting_code(kb) if kb else set()
    verdicts: dict[str, dict[str, Any]] = {}
    unscanned: list[tuple[str, bool]] = []
    for path, qid in sorted(outputs.items()):
        if path not in pages or "/raw/" in path:
            continue
        found = recorded(memos[qid].notes, path, page_hashes[path])
        if found is not None:
            verdicts[path] = found
        else:
            unscanned.append((path, path.rsplit("/", 1)[0] in quoting_code))
    verdicts.update(scan(unscanned, pages, root, store_root))
    for path in sorted(verdicts):
        found = verdicts[path]
        for target, resolved in links_of(found, root, store_root):
            for problem in missing_links([(target, resolved)], exists):
                # A link to a page the lock says was built, now missing, follows from that page's
                # loss: its cause is that page, shown once with every link to it.
                built = None if resolved is None else os.path.relpath(resolved, root).replace(os.sep, "/")
                cause = built if built in outputs else f"{path} -> {target}"
                findings.append(Finding(path, problem, "kbuild (or fix the page's source)",
                                        "dangling-link" if resolved is not None else "outside-link",
                                        cause, _line_of(pages.get(path), target)))
        for kind in found["secrets"]:
            findings.append(Finding(path, f"holds what looks like {kind}", "kbuild (it redacts), and rotate the secret",
                                    "secret", path))
        if found["injections"]:
            findings.append(Finding(path, f"holds {' and '.join(found['injections'])}: words addressed to a model",
                                    "take them out of its source (a title or heading it quotes), then kbuild",
                                    "injection", path))

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
                findings.append(Finding(path, "no passing grounding verdict for its current content", "kbuild",
                                        "ungrounded", path))

    if kb is not None:
        findings += contradiction_findings(memos.values(), root, kb.store)
        findings += [Finding(page, why, fix, "not-built" if why.startswith("not built") else "sources-file", page)
                     for page, why, fix in kb.unbuilt(memos.keys())]
        findings += _orphans(root, kb.store.root, set(outputs))
        if pages_read is not None:
            pages_read.update(pages)
    return _unique(findings)


DISAGREEMENTS = "disagreements"  # the note a project's confirmed disagreements are recorded under (rules/contradictions.py)


def contradiction_findings(memos: Iterable[Memo], root: Path, store: Store) -> list[Finding]:
    """Each disagreement of two sources the build confirmed, as the lock records it: failing
    (`contradiction`), or `accepted-contradiction` when its project's sources.yml accepts it
    (`accepted_disagreements`). Shown on the first statement's fact page, naming both."""
    found: list[Finding] = []
    accepted: dict[str, list[AcceptedDisagreement]] = {}
    for memo in memos:
        for pair in memo.notes.get(DISAGREEMENTS) or []:
            project, first, second = pair["project"], pair["first"], pair["second"]
            if project not in accepted:
                listed = store.sources_file(project)
                try:
                    accepted[project] = parse((root / listed).read_bytes(), listed).accepted
                except (SourcesError, OSError):
                    accepted[project] = []  # reported as a sources-file finding
            said = f"sources {first['source']} and {second['source']} disagree on {pair['subject']} " \
                   f"({pair['attribute']}: {first['value']} against {second['value']}): " \
                   f"\"{first['text']}\" ({first['page']}) against \"{second['text']}\" ({second['page']})"
            cause = f"{first['fact']} <> {second['fact']}"
            try:
                line = _line_of((root / first["page"]).read_bytes(), first["text"][:60], plain=True)
            except OSError:
                line = None
            why = next((a.reason for a in accepted[project] if a.names(first["fact"], second["fact"])), None)
            if why is None:
                found.append(Finding(first["page"], said, "make the sources agree, or accept it in "
                                     f"{store.sources_file(project)}: accepted_disagreements: "
                                     f"[{{facts: [{first['fact']}, {second['fact']}], reason: \"...\"}}]",
                                     "contradiction", cause, line))
            else:
                found.append(Finding(first["page"], f"accepted ({why}): {said}", "none: accepted in "
                                     f"{store.sources_file(project)}", "accepted-contradiction", cause, line))
    return found


PARALLEL_BYTES = 4 << 20  # below this much text to scan, a second process costs more than it saves


def scan(pages: list[tuple[str, bool]], contents: Mapping[str, bytes], root: Path,
         store_root: Path) -> dict[str, dict[str, Any]]:
    """The verdict of each (page, quotes code) of `pages`, on both cores when there is enough."""
    size = sum(len(contents[path]) for path, _ in pages)
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 2)
    if workers > 1 and size >= PARALLEL_BYTES:
        import multiprocessing

        from ..text import secret_kinds  # noqa: F401  imported once, here, not in each process

        try:
            context = multiprocessing.get_context("fork")  # the pages are inherited, not sent
        except ValueError:
            context = None
        if context is not None:
            global _SCANNING
            _SCANNING = (pages, contents, root, store_root)
            try:
                with context.Pool(workers - 1) as pool:
                    others = pool.map_async(_scan_part, [(n, workers) for n in range(1, workers)])
                    found = _scan_part((0, workers))  # this process scans its share meanwhile
                    for part in others.get():
                        found.update(part)
                return found
            except OSError:  # no second process to be had: one core, as below
                pass
            finally:
                _SCANNING = None
    return {path: page_verdict(path, contents[path], root, store_root, code) for path, code in pages}


_SCANNING: tuple[list[tuple[str, bool]], Mapping[str, bytes], Path, Path] | None = None


def _scan_part(part: tuple[int, int]) -> dict[str, dict[str, Any]]:
    assert _SCANNING is not None
    pages, contents, root, store_root = _SCANNING
    n, of = part
    return {path: page_verdict(path, contents[path], root, store_root, code) for path, code in pages[n::of]}


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


def _orphans(root: Path, store_root: str, produced: set[str]) -> list[Finding]:
    findings = []
    prefix = f"{store_root}/" if store_root else ""
    found = store_files(str(root), store_root, partial=True) or {}  # partial: never None
    for rel, is_link in sorted(found.items(), key=lambda item: item[0].split("/")):
        inner = rel[len(prefix):]
        if is_link:  # kbuild writes only regular files: a link here is someone else's
            findings.append(Finding(rel, "a symlink: a build must never write through it to where it points",
                                    f"rm {rel}  (then `kbuild` writes the page again)", "symlink", rel))
            continue
        name = rel.rsplit("/", 1)[-1]
        if "/raw/" in f"/{rel}" or name == "sources.yml" or rel in produced:
            continue
        if inner.split("/")[1:2] in (["notes"], ["imported"]):
            continue  # notes (kbuild learn) and the copies a bundle brought (kbuild import) are sources
        if name.endswith(TEMP_SUFFIX):
            findings.append(Finding(rel, "a temporary file left by an interrupted build", f"rm {rel}", "temporary-file", rel))
        else:
            findings.append(Finding(rel, "orphan: no rule produces this page", f"rm {rel}", "orphan", rel))
    return findings


def harness_findings(spec: Any) -> list[Finding]:
    """A harness file (AGENTS.md...) whose kbuild block is not what the build writes."""
    from ..store.harness import harness_problem

    if spec.application is None:
        return []
    found = []
    for harness in spec.harness_files:
        why = harness_problem(spec.root / harness, spec.root, spec.application.store.index())
        if why is not None:
            found.append(Finding(harness, why, "kbuild (it writes the block again; write your own words outside it)",
                                 "harness", harness))
    return found


def _root(reason: Reason, memo: Memo | None, root: Path, lock: str) -> tuple[str, str, str, Finding | None]:
    """What a stale page is built on, as a person names it: (kind, cause, the sentence said of
    each page it makes stale, the finding of the change itself when it is not a page of the
    store's own). No query ids: a reader of a pull request knows files and rules."""
    if reason.kind is Change.MERGED:  # one cause however many entries: the merge, shown on the lock
        cause = f"{lock}: merged"
        return "merged", cause, "both branches of a merge changed it", Finding(
            lock, "both branches of a merge changed entries of it: the merge marked them to run again",
            "kbuild, then commit kb/ and kbuild.lock", "merged", cause)
    if reason.kind is Change.INPUT_CHANGED:
        path = reason.subject
        gone = not (root / path).exists()
        return "changed-input", path, f"its input {path} {'is gone' if gone else 'changed'}", Finding(
            path, "deleted since the last build" if gone else "changed since the last build",
            "kbuild, then commit kb/ and kbuild.lock", "changed-input", path)
    if reason.kind in (Change.RULE_CHANGED, Change.RULE_GONE):
        cause = f"rule {reason.subject}"
        what = "is not defined any more" if reason.kind is Change.RULE_GONE else "changed"
        kbuildfile = "Kbuildfile.py" if (root / "Kbuildfile.py").exists() else ""
        return "changed-rule", cause, f"{cause} {what}", Finding(
            kbuildfile, f"{cause} {what} (its code, a prompt or a file it names, or kbuild's version)",
            "kbuild, then commit kb/ and kbuild.lock", "changed-rule", cause)
    if reason.kind is Change.OUTPUT_EDITED:
        path = reason.subject
        edited = (root / path).exists()
        return "hand-edited" if edited else "missing-page", path, \
            f"it is built on {path}, which {'was edited by hand' if edited else 'is missing'}", None
    pages = sorted(p for p in (memo.outputs if memo else ()) if p.endswith(".md"))
    named = pages[0] if pages else f"a step of rule {memo.rule}" if memo else "an earlier step"
    if memo is not None and any(dep == reason.subject and digest == FAILED for dep, digest in flat(memo.deps)):
        # the build made it from the rest while what it reads failed, and named the failure in it
        return "stale", named, f"it is built on {named}, which was built while a step it reads failed " \
            "(run `kbuild` to see why)", None
    return "stale", named, f"it is built on {named}, which the lock records as older than what it read", None


def _lock_line(engine: Engine, qid: str) -> tuple[str, int | None]:
    """The lock file (from the root) and line where the entry of `qid` starts (a lock is JSON, an entry a key)."""
    import json

    try:
        files = engine.lock.present()
    except LockError:
        files = [engine.lock_path]
    for file in files:
        try:
            line = _line_of(file.read_bytes(), json.dumps(qid) + ":", plain=True)
        except OSError:
            continue
        if line is not None:
            return _shown(engine, file), line
    return _shown(engine, engine.lock_path), None


def _shown(engine: Engine, file: Path) -> str:
    return file.relative_to(engine.root).as_posix() if file.is_relative_to(engine.root) else file.name


def _line_of(data: bytes | None, target: str, plain: bool = False) -> int | None:
    """The line of the first link to `target` in a page (`plain`: of the text `target`), 1-based;
    None when it is not found."""
    if data is None:
        return None
    text = data.decode("utf-8", errors="replace")
    needles = (target,) if plain else (f"]({target})", f"]({target} ", f"](<{target}>)", f"]({target}#", target)
    for needle in needles:
        at = text.find(needle)
        if at >= 0:
            return text.count("\n", 0, at) + 1
    return None


def _unique(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))


def as_dicts(findings: list[Finding]) -> list[dict[str, Any]]:
    return [asdict(f) for f in findings]
