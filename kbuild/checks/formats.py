"""The output formats of `kbuild check`: text, JSON (kbuild.check/1), GitHub annotations and step
summary, SARIF 2.1.0, GitLab Code Quality.

A check finds problems page by page (checks/store.py); a reviewer wants each root cause once: the
changed input, the hand-edited page, the dangling link, with the pages it makes stale. `problems`
groups the findings so; every format but the text one shows the groups, most important first.
Paths: a finding names a file from the Kbuildfile's folder; the CI formats name it from the git
repository's top (`prefix`), since the store may live in a subfolder.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .store import Finding

SCHEMA = "kbuild.check/1"

# kind -> (title, order: most important first, GitLab severity). docs/ci.md lists them.
KINDS: dict[str, tuple[str, int, str]] = {
    "check-failed": ("The check could not run", 0, "blocker"),
    "lock-refused": ("Lock entry refused", 1, "blocker"),
    "hand-edited": ("Page edited by hand", 2, "critical"),
    "secret": ("Secret in a page", 3, "critical"),
    "injection": ("Instruction to a model in a page", 3, "critical"),
    "missing-page": ("Built page missing", 4, "major"),
    "dangling-link": ("Dangling link", 5, "major"),
    "outside-link": ("Link outside the store", 5, "major"),
    "changed-input": ("Input changed, store not rebuilt", 6, "major"),
    "changed-rule": ("Rule changed, store not rebuilt", 7, "major"),
    "merged": ("Changed on both branches of a merge", 7, "major"),
    "lock-layout": ("Lock not laid out as the Kbuildfile says", 7, "major"),
    "sources-file": ("Problem in sources.yml", 8, "major"),
    "not-built": ("Listed but not built", 9, "major"),
    "ungrounded": ("No grounding verdict", 10, "major"),
    "harness": ("Harness block out of date", 11, "minor"),
    "symlink": ("Symlink in the store", 12, "major"),
    "orphan": ("Orphan page", 13, "minor"),
    "temporary-file": ("Temporary file left", 14, "minor"),
    "stale": ("Stale pages", 15, "major"),
    "forgotten-text": ("Forgotten note still in a page", 3, "critical"),
    "bad-note": ("Note that does not parse", 8, "major"),
    "import-conflict": ("Note kept from an import, to decide", 8, "major"),
    "needs-review": ("Note whose evidence changed", 16, "minor"),
    "contradiction": ("Sources disagree", 10, "major"),
    "accepted-contradiction": ("Accepted disagreement of sources", 17, "info"),
}
# What a check reports and passes with: a team's decision, shown so that it stays in sight.
ACCEPTED = {"accepted-contradiction"}
_UNKNOWN = ("kbuild check", 99, "major")
# What a root cause takes in: the findings that are its consequence, not problems of their own.
_FOLLOWS = {"stale", "ungrounded", "dangling-link"}
_ROOTS = {"hand-edited", "missing-page", "changed-input", "changed-rule", "merged"}


@dataclass
class Problem:
    """One root cause, and what follows from it."""

    kind: str
    cause: str
    page: str  # the file to annotate, from the Kbuildfile's folder ("" when none)
    line: int | None
    reason: str
    fix: str
    stale: list[str] = field(default_factory=list)  # the pages it makes stale
    also: list[Finding] = field(default_factory=list)  # the other findings it accounts for

    @property
    def title(self) -> str:
        return KINDS.get(self.kind, _UNKNOWN)[0]

    def message(self, prefix: str = "") -> str:
        """What a reviewer reads: the reason, the pages it makes stale, the fix; the paths from
        the repository's top (`prefix`, the Kbuildfile's folder from there)."""
        top = from_top(prefix, self.page)
        lines = [f"{top}: {self.reason}" if self.page and self.kind != "stale" else self.reason]
        if self.stale:
            lines.append(f"It makes {_count(len(self.stale), 'page')} stale: {', '.join(from_all(prefix, self.stale))}")
        lines += [f"{_at(from_top(prefix, f.page), f.line)}: {f.reason}" for f in self.also]
        lines.append(f"Fix: {self.fix}" if not prefix else f"Fix (in {prefix}/): {self.fix}")
        return "\n".join(lines)


def failing(findings: list[Finding]) -> list[Finding]:
    """The findings that fail the check: all but the accepted."""
    return [f for f in findings if f.kind not in ACCEPTED]


def problems(findings: list[Finding]) -> list[Problem]:
    """The findings by root cause, most important first."""
    roots: dict[str, Problem] = {}
    alone: list[Problem] = []
    for f in findings:
        if f.kind in _ROOTS and f.cause not in roots:
            roots[f.cause] = Problem(f.kind, f.cause, f.page, f.line, f.reason, f.fix)
    stale_groups: dict[str, Problem] = {}
    for f in findings:
        root = roots.get(f.cause)
        if f.kind in _ROOTS and root is not None and root.page == f.page and root.kind == f.kind:
            continue  # the root itself
        if root is not None and f.kind in _FOLLOWS | _ROOTS:
            if f.kind == "stale":
                root.stale.append(f.page)
            else:
                root.also.append(f)
        elif f.kind == "stale":  # built on a change that is no finding of its own
            group = stale_groups.setdefault(f.cause, Problem("stale", f.cause, f.page, None,
                                                             f.reason, f.fix))
            group.stale.append(f.page)
        else:
            alone.append(Problem(f.kind, f.cause or f.page, f.page, f.line, f.reason, f.fix))
    found = [*roots.values(), *stale_groups.values(), *alone]
    return sorted(found, key=lambda p: (KINDS.get(p.kind, _UNKNOWN)[1], p.page, p.line or 0, p.cause))


def failure(message: str, page: str, line: int | None) -> list[Problem]:
    """The one problem of a check that could not run."""
    return [Problem("check-failed", page, page, line, message, _failure_fix(page))]


def _failure_fix(page: str) -> str:
    if page.endswith(".lock"):
        from ..engine.lockfile import conflict_remedy

        return conflict_remedy(page)
    return "fix the error it names, then run `kbuild check` again"


def repository_prefix(root: Path) -> str:
    """The folder of the Kbuildfile from the top of its git repository ("" at the top, or outside git)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    if not top:
        return ""
    try:
        rel = root.resolve().relative_to(Path(top).resolve()).as_posix()
    except ValueError:
        return ""
    return "" if rel == "." else rel


def from_top(prefix: str, page: str) -> str:
    if not page:
        return page
    return f"{prefix}/{page}" if prefix else page


# --- text -------------------------------------------------------------------------------------

def text(findings: list[Finding]) -> str:
    lines = [f"{f.page}{'' if f.line is None else f':{f.line}'}: {f.reason}  (fix: {f.fix})" for f in failing(findings)]
    lines += [f"{f.page}: {f.reason}" for f in findings if f.kind in ACCEPTED]
    bad, accepted = len(failing(findings)), len(findings) - len(failing(findings))
    lines.append(f"{bad} problem{'' if bad == 1 else 's'}" if bad else "ok: every page is up to date, linked and grounded"
                 + (f" ({_count(accepted, 'accepted disagreement')})" if accepted else ""))
    return "\n".join(lines)


# --- JSON: kbuild.check/1 ---------------------------------------------------------------------

def as_json(findings: list[Finding], found: list[Problem], prefix: str, ran: bool = True) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "ok": ran and all(p.kind in ACCEPTED for p in found),
        "ran": ran,
        "root": prefix,
        "problems": [{"kind": p.kind, "title": p.title, "cause": p.cause, "page": p.page, "line": p.line,
                      "reason": p.reason, "fix": p.fix, "stale": p.stale, "message": p.message()} for p in found],
        "findings": [{"kind": f.kind, "cause": f.cause, "page": f.page, "line": f.line, "reason": f.reason,
                      "fix": f.fix} for f in findings],
    }


# --- GitHub Actions ---------------------------------------------------------------------------

def escape_data(value: str) -> str:
    """A workflow command's message, as GitHub's toolkit escapes it (% \\r \\n)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A workflow command's property value (file=, title=): also : and , which end it."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github(found: list[Problem], prefix: str) -> str:
    lines = []
    for p in found:
        props = []
        if p.page:
            props.append(f"file={escape_property(from_top(prefix, p.page))}")
            if p.line is not None:
                props.append(f"line={p.line}")
        props.append(f"title={escape_property(p.title)}")
        command = "notice" if p.kind in ACCEPTED else "error"
        lines.append(f"::{command} {','.join(props)}::{escape_data(p.message(prefix))}")
    return "\n".join(lines)


def step_summary(findings: list[Finding], found: list[Problem], prefix: str, ran: bool = True) -> str:
    """The Markdown of $GITHUB_STEP_SUMMARY: each root cause, then the full table of findings."""
    out = ["## kbuild check", ""]
    if all(p.kind in ACCEPTED for p in found):
        out += ["Every page is up to date, linked and grounded."
                + (f" {_count(len(found), 'accepted disagreement')}: {'; '.join(p.reason for p in found)}" if found else ""),
                ""]
        return "\n".join(out)
    if not ran:
        out += ["The check could not run.", ""]
    out += [f"{_count(len(found), 'problem')}, {_count(len(findings), 'finding')} in all.", "",
            "| problem | file | line | what | pages made stale | fix |", "|---|---|---|---|---|---|"]
    for p in found:
        stale = "<br>".join(_cell(s) for s in from_all(prefix, p.stale))
        out.append(f"| {_cell(p.title)} | {_cell(from_top(prefix, p.page))} | {p.line or ''} | {_cell(p.reason)} "
                   f"| {stale} | {_cell(p.fix)} |")
    if findings:
        out += ["", "<details><summary>Every finding</summary>", "",
                "| kind | page | line | reason | fix |", "|---|---|---|---|---|"]
        out += [f"| {f.kind} | {_cell(from_top(prefix, f.page))} | {f.line or ''} | {_cell(f.reason)} | {_cell(f.fix)} |"
                for f in findings]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def from_all(prefix: str, pages: list[str]) -> list[str]:
    return [from_top(prefix, page) for page in pages]


def _cell(value: str) -> str:
    """Text in a Markdown table cell: pipes escaped, on one line, code spans kept."""
    return value.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


# --- SARIF 2.1.0 ------------------------------------------------------------------------------

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif(found: list[Problem], prefix: str, version: str) -> dict[str, Any]:
    kinds = sorted({p.kind for p in found}, key=lambda k: KINDS.get(k, _UNKNOWN)[1])
    index = {kind: n for n, kind in enumerate(kinds)}
    rules = [{"id": kind, "name": "".join(w.capitalize() for w in kind.split("-")),
              "shortDescription": {"text": KINDS.get(kind, _UNKNOWN)[0]},
              "defaultConfiguration": {"level": _level(kind)}} for kind in kinds]
    results = []
    for p in found:
        result: dict[str, Any] = {
            "ruleId": p.kind, "ruleIndex": index[p.kind], "level": _level(p.kind),
            "message": {"text": p.message(prefix)},
            "partialFingerprints": {"kbuildCause/v1": _fingerprint(p, prefix)},
        }
        if p.page:
            location: dict[str, Any] = {"artifactLocation": {"uri": quote(from_top(prefix, p.page))}}
            if p.line is not None:
                location["region"] = {"startLine": p.line}
            result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "kbuild", "version": version, "rules": rules}},
                  "results": results}],
    }


def _level(kind: str) -> str:
    return "note" if kind in ACCEPTED else "error"


# --- GitLab Code Quality ----------------------------------------------------------------------

def gitlab(found: list[Problem], prefix: str) -> list[dict[str, Any]]:
    return [{"description": p.message(prefix), "check_name": p.kind, "fingerprint": _fingerprint(p, prefix),
             "severity": KINDS.get(p.kind, _UNKNOWN)[2],
             "location": {"path": from_top(prefix, p.page or "Kbuildfile.py"), "lines": {"begin": p.line or 1}}}
            for p in found]


def _fingerprint(p: Problem, prefix: str) -> str:
    """Stable across runs for the same root cause: not the message, which lists the stale pages."""
    return hashlib.sha256(json.dumps([p.kind, from_top(prefix, p.page), p.cause]).encode()).hexdigest()


def _at(page: str, line: int | None) -> str:
    return page if line is None else f"{page}:{line}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
