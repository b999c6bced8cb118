"""`kbuild check`: is the committed store up to date and grounded (for CI)."""
from __future__ import annotations

import json

import click

from ..engine import LockError
from .session import FAILED, WRONG, KbuildError, Session, pass_session


@click.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text", show_default=True,
              help="github prints GitHub Actions annotations.")
@pass_session
def check(session: Session, fmt: str) -> None:
    """Fail (exit 1) while any page is stale, edited by hand, dangling, ungrounded, unbuilt or orphaned.

    Needs no model, no network and no .kbuild/: run it in CI on a fresh clone.

    Example: kbuild check --format github
    """
    from ..checks.store import as_dicts, check_store, harness_findings

    try:
        spec, engine = session.load()
        findings = check_store(engine, spec.application)
        findings += harness_findings(spec)
    except KbuildError:
        raise
    except LockError as exc:
        raise KbuildError(f"the check could not run: {exc}", WRONG) from None
    except Exception as exc:  # the check itself broke: say so, and do not pass
        if session.debug:
            raise
        raise KbuildError(f"the check could not run: {type(exc).__name__}: {exc}", WRONG) from None
    if fmt == "json":
        click.echo(json.dumps(as_dicts(findings), indent=2))
    elif fmt == "github":
        for f in findings:
            click.echo(f"::error file={f.page},title=kbuild check::{f.reason}. Fix: {f.fix}")
    else:
        for f in findings:
            click.echo(f"{f.page}: {f.reason}  (fix: {f.fix})")
        click.echo(f"{len(findings)} problems" if findings else "ok: every page is up to date, linked and grounded")
    if findings:
        raise click.exceptions.Exit(FAILED)
