"""`kbuild doctor`: the setup checked, read-only, each finding with what to do about it."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .. import __version__
from ..records import checked
from ..application import Application
from ..buildfile import Buildfile
from ..engine import Engine, LockError
from ..engine.layout import FOLDER
from ..engine.state import damage
from ..retrieval.embedding import INSTALL_MODEL, READERS, EmbeddingError, embedder_for, local_model_installed
from ..model import Backend
from ..store.sources import SourcesError, parse

if TYPE_CHECKING:
    from ..retrieval.embedding import SemanticSettings

Status = Literal["PASS", "WARN", "FAIL"]


@dataclass(frozen=True)
class Finding:
    status: Status
    what: str
    fix: str = ""  # what to do; shown unless it passed


def diagnose(load: Callable[[], tuple[Buildfile, Engine]]) -> list[Finding]:
    """Python, the Kbuildfile (`load` finds and runs it), the prompts, the model, every
    sources.yml, .gitignore, the local state and the lock, in that order. Nothing after a
    Kbuildfile that does not load is checked: it would only repeat the failure."""
    version = sys.version_info
    findings = [Finding("PASS" if version >= (3, 11) else "FAIL", f"Python {version.major}.{version.minor}",
                        "install Python 3.11 or newer")]
    try:
        spec, engine = load()
        findings += _kbuildfile(spec)
    except Exception as exc:
        return [*findings, Finding("FAIL", f"the Kbuildfile: {exc}", "run `kbuild init`, or fix the error it names")]
    app = spec.application
    findings.append(_model(app.backend if app is not None else None))
    findings.append(_semantic(getattr(app, "semantic", None)))  # an application other than the knowledge base has none
    findings += _sources(app, spec.root) if app is not None else []
    findings += _local_files(spec.root, engine)
    findings += _merge_drivers(spec.root)
    return findings


def _kbuildfile(spec: Buildfile) -> list[Finding]:
    """Its rules, the prompt files they name, its targets; raises what running them raises."""
    findings = [Finding("PASS", f"{spec.path} loads: {len(spec.rules)} rules")]
    unreadable = [f"{r.name}: {p}" for r in spec.rules for p in r.files if not _readable(p)]
    if unreadable:
        findings.append(Finding("FAIL", f"prompt files cannot be read ({len(unreadable)}): {unreadable[0]}",
                                "reinstall kbuild (`pip install --force-reinstall kbuild`), or fix the path the rule names"))
    else:
        prompts = {p for r in spec.rules for p in r.files}
        findings.append(Finding("PASS", f"every prompt file the rules name can be read ({len(prompts)})"))
    findings.append(Finding("PASS", f"targets(): {len(list(spec.targets()))} queries"))
    return findings


def _model(backend: Backend | None) -> Finding:
    if backend is None or backend.name == "offline":
        return Finding("PASS", "model: the offline backend (extractive; no network, no key)")
    settings = backend.settings
    if settings is None:  # a plug-in's backend that calls no OpenAI-compatible server: what it reaches is its own to say
        return Finding("PASS", f"model: {backend.label}")
    url = (settings.base_url or "https://api.openai.com/v1").rstrip("/") + "/models"
    if settings.missing_key:
        return Finding("WARN", f"model: {settings.missing_key}: a build's calls fail (`kbuild check` needs no key)",
                       "set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server")
    try:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {settings.api_key or ''}"})
        urllib.request.urlopen(request, timeout=5).close()
        return Finding("PASS", f"model: {settings.model} at {url} answers")
    except Exception as exc:
        return Finding("WARN", f"model: {url} does not answer ({exc})", "start the server, or check OPENAI_BASE_URL")


def _semantic(settings: SemanticSettings | None) -> Finding:
    """Whether search ranks by meaning as well as by words, and whether its embedder can work."""
    if settings is None:
        return Finding("PASS", "semantic ranking: off (search ranks by words; `semantic=` in the Kbuildfile turns it on)")
    embedder = embedder_for(settings)
    try:
        embedder.identity()  # a folder the Kbuildfile names holds a model
    except EmbeddingError as exc:
        return Finding("FAIL", f"semantic ranking: on, but {exc}", "install it, or remove semantic= from the Kbuildfile")
    if settings.source == "local":
        if not local_model_installed(default_model=not settings.model):
            return Finding("FAIL", "semantic ranking: on, but semantic ranking on this machine needs its model "
                           f"and its readers ({', '.join(READERS)})", INSTALL_MODEL)
        return Finding("PASS", f"semantic ranking: on, fused with words ({embedder.describe()}, offline)")
    return Finding("PASS", f"semantic ranking: on, fused with words ({embedder.describe()})")


def _sources(app: Application, root: Path) -> list[Finding]:
    findings = []
    for project in app.projects():
        rel = app.store.sources_file(project)
        try:
            listing = parse((root / rel).read_bytes(), rel)
        except SourcesError as exc:
            findings.append(Finding("FAIL", str(exc), "fix the YAML"))
            continue
        problem = f"; {listing.problems[0]}" if listing.problems else ""
        findings.append(Finding("WARN" if listing.problems else "PASS", f"{rel}: {len(listing.sources)} sources{problem}",
                                "fix the entry it names"))
    return findings


def _local_files(root: Path, engine: Engine) -> list[Finding]:
    """.gitignore, the local state and the lock."""
    findings = []
    gitignore = root / ".gitignore"
    if f"{FOLDER}/" in (gitignore.read_text() if gitignore.exists() else ""):
        findings.append(Finding("PASS", f".gitignore keeps {FOLDER}/ out of git"))
    else:
        findings.append(Finding("WARN", f".gitignore does not name {FOLDER}/", f"add the line `{FOLDER}/`"))
    state_file = engine.local.state_db
    if state_file.exists():
        damaged = damage(state_file)
        shown = state_file.relative_to(root)
        if damaged is None:
            findings.append(Finding("PASS", f"{shown}: readable"))
        else:
            findings.append(Finding("FAIL", f"{shown} is damaged ({damaged})",
                                    "run `kbuild`: it drops the local state and rebuilds it from kbuild.lock"))
    if engine.lock_path.exists():
        findings += _lock_findings(engine)
    else:
        findings.append(Finding("WARN", "no kbuild.lock yet", "run `kbuild`, then commit kb/ and kbuild.lock"))
    if (root / checked.RECORD).exists():
        if checked.holds(str(root.resolve()), __version__, strict=False):
            findings.append(Finding("PASS", f"{checked.RECORD} is of these files: `kbuild check` answers from it"))
        else:
            findings.append(Finding("WARN", f"{checked.RECORD} is not of these files (or of this kbuild): "
                                    "`kbuild check` runs the whole way", f"`kbuild check --record`, then commit "
                                    f"{checked.RECORD} with kb/ and kbuild.lock"))
    return findings


def _merge_drivers(root: Path) -> list[Finding]:
    """Whether git merges the lock and sources.yml through kbuild here: .gitattributes names the
    drivers, and git's config (which a clone does not copy) says what runs them. Nothing outside git."""
    from .scaffold import GITATTRIBUTES_LINES, git_config_command, merge_drivers

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None

    inside = git("rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != "true":
        return []
    findings = []
    attributes = root / ".gitattributes"
    present = attributes.read_text().splitlines() if attributes.is_file() else []
    lacking = [line for line in GITATTRIBUTES_LINES if line not in present and not line.startswith("kbuild.lock.d/")]
    if lacking:
        findings.append(Finding("WARN", f".gitattributes does not send {len(lacking)} of kbuild's files to its "
                                "drivers (git merges them as text)", "add the lines: " + "; ".join(lacking)))
    missing: list[str] = []
    gone: list[str] = []
    for key in (k for k in merge_drivers() if k.endswith(".driver")):
        name = key.split(".")[1]
        found = git("config", "--get", key)
        command = found.stdout.strip() if found is not None else ""
        if not command:
            missing.append(name)
        elif not _runs(command):
            gone.append(f"{name} runs `{command}`")
    if missing:
        findings.append(Finding("WARN", f"git's merge drivers are not registered here ({', '.join(missing)}; git "
                                "does not clone them): a merge conflicts in kbuild.lock and sources.yml",
                                git_config_command()))
    elif gone:
        findings.append(Finding("WARN", f"git's merge drivers name a program that is not there ({'; '.join(gone)})",
                                git_config_command()))
    else:
        findings.append(Finding("PASS", "git's merge drivers are registered (kbuild.lock, sources.yml, the pages)"))
    return findings


def _runs(command: str) -> bool:
    """Whether the program a driver's command starts with is there to run."""
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        return False
    if os.path.isabs(program):
        return os.access(program, os.X_OK)
    return shutil.which(program) is not None


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
        return True
    except OSError:
        return False


LOCK_WARN_BYTES = 40_000_000  # GitHub warns at 50 MB a file and refuses a push over 100 MiB


def _lock_findings(engine: Engine) -> list[Finding]:
    """The lock's files read, and the largest one's size against what git hosts take."""
    lock = engine.lock
    found: list[Finding] = []
    try:
        files = [(file, len(memos)) for file, memos in lock.read()]
    except LockError as exc:
        from ..engine.lockfile import conflict_remedy

        return [Finding("FAIL", str(exc), conflict_remedy())]
    if lock.split:  # a store split after `kbuild init` wrote .gitattributes has no line for the shards
        from .scaffold import GITATTRIBUTES_LINES

        line = next(x for x in GITATTRIBUTES_LINES if x.startswith(lock.name(lock.folder)))
        attributes = engine.root / ".gitattributes"
        if line not in (attributes.read_text().splitlines() if attributes.is_file() else []):
            found.append(Finding("WARN", f".gitattributes does not merge {lock.name(lock.folder)}/ with kbuild's driver",
                                 f"add the line `{line}`"))
    queries = sum(n for _, n in files)
    shards = f" in {len(files)} files" if len(files) > 1 else ""
    found.insert(0, Finding("PASS", f"kbuild.lock: {queries} queries{shards}"))
    largest = max((f for f, _ in files), key=lambda f: f.stat().st_size)
    size = largest.stat().st_size
    if size > LOCK_WARN_BYTES:
        fix = ("give the largest project's sources to smaller projects" if lock.split else
               "set `split_lock = True` in Kbuildfile.py and run `kbuild`: a lock file per project (docs/scale.md)")
        found.append(Finding("WARN", f"{lock.name(largest)} is {size / 1e6:.0f} MB; GitHub refuses a file over "
                             "100 MiB", fix))
    return found
