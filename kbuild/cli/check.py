"""`kbuild check`: is the committed store up to date and grounded (for CI)."""
from __future__ import annotations

import json
import os
import re
import traceback
from pathlib import Path

import click

from ..buildfile import Buildfile
from ..engine import Engine, LockError
from .session import FAILED, WRONG, KbuildError, Session, pass_session

FORMATS = ["text", "json", "github", "sarif", "gitlab"]


@click.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="json: kbuild.check/1 (docs/json.md); github: Actions annotations and a step summary; "
                   "sarif: SARIF 2.1.0 for code scanning; gitlab: GitLab Code Quality.")
@click.option("--json", "as_json", is_flag=True, help="The same as --format json, as other commands take it.")
@click.option("--strict", is_flag=True, help="Fail too while a note needs review (its evidence changed since it "
                                             "was written).")
@click.option("--record", is_flag=True, help="When the check passes, write kbuild.checked beside the lock: commit it, "
                                             "and a fresh clone's check hashes the files instead of running again.")
@click.option("--full", is_flag=True, help="Run the whole check even when kbuild.checked holds.")
@pass_session
def check(session: Session, fmt: str, as_json: bool, strict: bool, record: bool = False, full: bool = False) -> None:
    """Fail (exit 1) while any page is stale, edited by hand, dangling, ungrounded, unbuilt or orphaned.

    Needs no model, no network and no .kbuild/: run it in CI on a fresh clone. Exit 2: the check
    could not run (a conflicted lock, a broken Kbuildfile); every format says so too.

    A passing check with --record writes kbuild.checked, the hash of every file it read: a later
    check that finds them all the same passes without running again (--full runs it anyway).

    Example: kbuild check --format github
    """
    from .. import __version__
    from ..records import checked
    from ..checks import formats
    from ..checks.store import check_store, harness_findings
    from ..notes.findings import note_findings

    if as_json:
        if fmt not in ("text", "json"):
            raise KbuildError(f"--json and --format {fmt} ask for two formats; give one", WRONG)
        fmt = "json"

    folder = _store_folder(session)
    if not (full or record) and checked.holds(str(folder), __version__, strict):
        if fmt == "text":
            click.echo(formats.text([]))
        else:
            _emit(fmt, [], [], folder, ran=True)
        return
    named: set[str] = set()
    try:
        spec, engine = session.load()
        pages: dict[str, bytes] = {}
        kb = spec.application
        findings = check_store(engine, kb, named, pages)
        if kb is not None:
            findings += note_findings(engine.root, kb.store, kb.projects(), pages, strict)
        findings += harness_findings(spec)
    except Exception as exc:  # the check itself broke: say so, and do not pass
        if session.debug and not isinstance(exc, (KbuildError, LockError)):
            raise
        message = exc.format_message() if isinstance(exc, click.ClickException) else \
            str(exc) if isinstance(exc, LockError) else f"{type(exc).__name__}: {exc}"
        root = _store_folder(session)
        message = f"the check could not run: {message}".replace(f"{root}{os.sep}", "")
        if fmt != "text":
            page, line = _where(exc, root)
            _emit(fmt, [], formats.failure(message, page, line), root, ran=False)
        raise KbuildError(message, WRONG) from None
    if spec.application is not None and spec.application.backend.notice and any(f.kind == "changed-rule" for f in findings):
        # nobody chose the offline backend: a store a model built reads as every rule changed
        click.echo("kbuild: no model is named here, so this check reads the store as the offline backend would "
                   "build it; if a model built it, name that model (KBUILD_MODEL, and OPENAI_BASE_URL if the "
                   "build used one, or model= in the Kbuildfile): the check needs no key", err=True)
    if fmt == "text":
        click.echo(formats.text(findings))
    else:
        _emit(fmt, findings, formats.problems(findings), engine.root, ran=True)
    if formats.failing(findings):
        raise click.exceptions.Exit(FAILED)
    if record:
        _record(spec, engine, named, strict)


def _record(spec: Buildfile, engine: Engine, named: set[str], strict: bool) -> None:
    """Write kbuild.checked for the check that just passed, or say why it cannot be."""
    from .. import __version__
    from ..records import checked

    root = os.path.realpath(engine.root)
    app = spec.application
    store = app.store.root.strip("/") if app is not None else ""
    if not store:
        raise KbuildError(f"--record: {checked.RECORD} needs a knowledge base with its store in a folder "
                          "(knowledge_base(..., store=\"kb\"))", WRONG)
    lock_folder = os.path.relpath(engine.lock.folder, root).replace(os.sep, "/")
    folders = [store, lock_folder]
    inside = tuple(f"{folder}/" for folder in folders)
    lock = [os.path.relpath(f, root).replace(os.sep, "/") for f in engine.lock.present()]
    files = [*lock, *spec.harness_files, *(p for p in named if not p.startswith(inside))]
    code = checked.loaded_code(root, [str(spec.path), *(str(p) for r in spec.rules for p in r.files)])
    if code is None:
        raise KbuildError(f"--record: the Kbuildfile or a rule's prompt is outside {root} and kbuild: "
                          f"{checked.RECORD} not written", WRONG)
    if not checked.write(root, __version__, strict, code, folders, files):
        raise KbuildError(f"--record: a file of the store could not be read: {checked.RECORD} not written", FAILED)


def _emit(fmt: str, findings: list, found: list, root: Path, ran: bool) -> None:
    from .. import __version__
    from ..checks import formats

    prefix = formats.repository_prefix(root)
    if fmt == "json":
        click.echo(json.dumps(formats.as_json(findings, found, prefix, ran), indent=2, ensure_ascii=False))
    elif fmt == "sarif":
        click.echo(json.dumps(formats.sarif(found, prefix, __version__), indent=2, ensure_ascii=False))
    elif fmt == "gitlab":
        click.echo(json.dumps(formats.gitlab(found, prefix), indent=2, ensure_ascii=False))
    elif fmt == "github":
        if found:
            click.echo(formats.github(found, prefix))
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                with open(summary, "a", encoding="utf-8") as out:  # appended: other steps write theirs
                    out.write(formats.step_summary(findings, found, prefix, ran))
            except OSError as exc:
                click.echo(f"kbuild: could not write the step summary {summary}: {exc}", err=True)


def _store_folder(session: Session) -> Path:
    """The folder of the Kbuildfile, found without running it (the folder asked for when there is none)."""
    found = session.kbuildfile()
    return found.parent if found is not None else session.directory.resolve()


def _where(exc: BaseException, root: Path) -> tuple[str, int | None]:
    """The file (from `root`) and line a check that could not run is to be shown on."""
    lock = root / "kbuild.lock"
    if isinstance(exc, LockError) or "kbuild.lock" in str(exc):
        line = None
        try:
            for n, text in enumerate(lock.read_text("utf-8", errors="replace").splitlines(), 1):
                if re.match(r"^(<{7}|={7}|>{7})", text):
                    line = n
                    break
        except OSError:
            pass
        return "kbuild.lock", line
    kbuildfile = root / "Kbuildfile.py"
    line = None
    seen: BaseException | None = exc
    while seen is not None and line is None:  # a SyntaxError names its line; a failure has a frame there
        if isinstance(seen, SyntaxError) and seen.filename and Path(seen.filename).name == "Kbuildfile.py":
            line = seen.lineno
        else:
            frames = [f for f in traceback.extract_tb(seen.__traceback__) if Path(f.filename) == kbuildfile]
            if frames:
                line = frames[-1].lineno
        seen = seen.__cause__ or seen.__context__
    return "Kbuildfile.py", line
