"""`kbuild doctor`: check the setup."""
from __future__ import annotations

import click

from .session import FAILED, Session, pass_session

COLOURS = {"PASS": "green", "WARN": "yellow", "FAIL": "red"}


@click.command()
@pass_session
def doctor(session: Session) -> None:
    """Check the setup, read-only: each line PASS, WARN or FAIL with what to do; exit 1 on FAIL.

    Example: kbuild doctor
    """
    from ..doctor import diagnose

    findings = diagnose(session.load)
    for f in findings:
        fix = f"  (fix: {f.fix})" if f.status != "PASS" and f.fix else ""
        click.echo(click.style(f.status, fg=COLOURS[f.status]) + f"  {f.what}" + fix)
    if any(f.status == "FAIL" for f in findings):
        raise click.exceptions.Exit(FAILED)
