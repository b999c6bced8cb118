"""`kbuild doctor`: the setup checked, read-only, each finding with what to do about it."""
from __future__ import annotations

import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .buildfile import Buildfile
from .engine import Engine, LockError, read_lock
from .engine.state import damage
from .store.sources import SourcesError, parse

Status = Literal["PASS", "WARN", "FAIL"]


@dataclass(frozen=True)
class Finding:
    status: Status
    what: str
    fix: str = ""  # what to do; shown unless it passed


def diagnose(load: Callable[[], tuple[Buildfile, Engine]]) -> list[Finding]:
    """Python, the Kbuildfile (`load` finds and runs it), the prompts, the model, every
    sources.yml, .gitignore, the local state and the lock, in that order."""
    findings: list[Finding] = []

    def say(status: Status, what: str, fix: str = "") -> None:
        findings.append(Finding(status, what, fix))

    version = sys.version_info
    say("PASS" if version >= (3, 11) else "FAIL", f"Python {version.major}.{version.minor}", "install Python 3.11 or newer")
    try:
        spec, engine = load()
        say("PASS", f"{spec.path} loads: {len(spec.rules)} rules")
        unreadable = [f"{r.name}: {p}" for r in spec.rules for p in r.prompts if not _readable(p)]
        prompts = {p for r in spec.rules for p in r.prompts}
        if unreadable:
            say("FAIL", f"prompt files cannot be read ({len(unreadable)}): {unreadable[0]}",
                "reinstall kbuild (`pip install --force-reinstall kbuild`), or fix the path the rule names")
        else:
            say("PASS", f"every prompt file the rules name can be read ({len(prompts)})")
        say("PASS", f"targets(): {len(list(spec.targets()))} queries")
    except Exception as exc:
        say("FAIL", f"the Kbuildfile: {exc}", "run `kbuild init`, or fix the error it names")
        return findings
    app = spec.application
    backend = app.backend if app is not None else None
    if backend is None or backend.name == "offline":
        say("PASS", "model: the offline backend (extractive; no network, no key)")
    else:
        settings = backend.settings  # type: ignore[attr-defined]  # every backend but the offline one has some
        url = (settings.base_url or "https://api.openai.com/v1").rstrip("/") + "/models"
        try:
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {settings.api_key or ''}"})
            urllib.request.urlopen(request, timeout=5).close()
            say("PASS", f"model: {settings.model} at {url} answers")
        except Exception as exc:
            say("WARN", f"model: {url} does not answer ({exc})", "start the server, or check OPENAI_BASE_URL")
    for project in app.projects() if app is not None else []:
        rel = app.store.sources_file(project)
        try:
            listing = parse((spec.root / rel).read_bytes(), rel)
            say("WARN" if listing.problems else "PASS", f"{rel}: {len(listing.sources)} sources"
                + (f"; {listing.problems[0]}" if listing.problems else ""), "fix the entry it names")
        except SourcesError as exc:
            say("FAIL", str(exc), "fix the YAML")
    gitignore = spec.root / ".gitignore"
    if ".kbuild/" in (gitignore.read_text() if gitignore.exists() else ""):
        say("PASS", ".gitignore keeps .kbuild/ out of git")
    else:
        say("WARN", ".gitignore does not name .kbuild/", "add the line `.kbuild/`")
    state_file = engine.local.state_db
    if state_file.exists():
        damaged = damage(state_file)
        shown = state_file.relative_to(spec.root)
        if damaged is None:
            say("PASS", f"{shown}: readable")
        else:
            say("FAIL", f"{shown} is damaged ({damaged})",
                "run `kbuild`: it drops the local state and rebuilds it from kbuild.lock")
    if engine.lock_path.exists():
        try:
            say("PASS", f"kbuild.lock: {len(read_lock(engine.lock_path))} queries")
        except LockError as exc:
            say("FAIL", str(exc), "take either side of the conflict and run `kbuild`")
    else:
        say("WARN", "no kbuild.lock yet", "run `kbuild`, then commit kb/ and kbuild.lock")
    return findings


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
        return True
    except OSError:
        return False
