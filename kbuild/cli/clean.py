"""`kbuild clean`: drop the local state."""
from __future__ import annotations

import click

from ..engine import BuildLocked
from ..store.localstate import LocalState
from .session import LOCKED, KbuildError, Session, pass_session


@click.command()
@click.option("--cache", is_flag=True, help="Drop the model-call cache too (the next build pays for every call).")
@pass_session
def clean(session: Session, cache: bool) -> None:
    """Drop the local state in .kbuild/ (rebuildable from the lock and the call cache).

    Example: kbuild clean   (kbuild clean --cache also drops every cached model answer)
    """
    _, engine = session.load()
    local = LocalState(engine.state_dir)
    if not local.path.exists():
        click.echo("nothing to clean")
        return
    try:
        local.clear(keep_cache=not cache)
    except BuildLocked as exc:
        raise KbuildError(str(exc), LOCKED) from None
    click.echo(f"cleaned {local.path}" + ("" if cache else " (the call cache kept; --cache drops it too)"))
