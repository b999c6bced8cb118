"""`kbuild doctor`: check the setup."""
from __future__ import annotations

import click

from .jsonout import JsonCommand, emit, json_option
from .session import FAILED, Session, pass_session

COLOURS = {"PASS": "green", "WARN": "yellow", "FAIL": "red"}


@click.command(cls=JsonCommand)
@json_option
@pass_session
def doctor(session: Session, as_json: bool) -> None:
    """Check the setup, read-only: each line PASS, WARN or FAIL with what to do; exit 1 on FAIL.

    Example: kbuild doctor
    """
    from ..services.answers import doctor_answer
    from ..services.doctor import diagnose

    findings = diagnose(session.load)
    if as_json:
        emit(doctor_answer(findings))
    else:
        for f in findings:
            fix = f"  (fix: {f.fix})" if f.status != "PASS" and f.fix else ""
            click.echo(click.style(f.status, fg=COLOURS[f.status]) + f"  {f.what}" + fix)
    if any(f.status == "FAIL" for f in findings):
        raise click.exceptions.Exit(FAILED)
