"""`kbuild check`: is the committed store up to date and grounded (for CI)."""
from __future__ import annotations

import json
import os
import re
import traceback
from pathlib import Path

import click

from ..engine import LockError
from .session import FAILED, WRONG, KbuildError, Session, pass_session

FORMATS = ["text", "json", "github", "sarif", "gitlab"]


@click.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="json: kbuild.check/1 (docs/json.md); github: Actions annotations and a step summary; "
                   "sarif: SARIF 2.1.0 for code scanning; gitlab: GitLab Code Quality.")
@click.option("--strict", is_flag=True, help="Fail too while a note needs review (its evidence changed since it "
                                             "was written).")
@pass_session
def check(session: Session, fmt: str, strict: bool) -> None:
    """Fail (exit 1) while any page is stale, edited by hand, dangling, ungrounded, unbuilt or orphaned.

    Needs no model, no network and no .kbuild/: run it in CI on a fresh clone. Exit 2: the check
    could not run (a conflicted lock, a broken Kbuildfile); every format says so too.

    Example: kbuild check --format github
    """
    from ..checks import formats
    from ..checks.store import check_store, harness_findings

    try:
        spec, engine = session.load()
        findings = check_store(engine, spec.application, strict)
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
    backend = getattr(spec.application, "backend", None)
    if getattr(backend, "notice", None) and any(f.kind == "changed-rule" for f in findings):
        # nobody chose the offline backend: a store a model built reads as every rule changed
        click.echo("kbuild: no model is named here, so this check reads the store as the offline backend would "
                   "build it; if a model built it, name that model (KBUILD_MODEL, and OPENAI_BASE_URL if the "
                   "build used one, or model= in the Kbuildfile): the check needs no key", err=True)
    if fmt == "text":
        click.echo(formats.text(findings))
    else:
        _emit(fmt, findings, formats.problems(findings), engine.root, ran=True)
    if findings:
        raise click.exceptions.Exit(FAILED)


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
