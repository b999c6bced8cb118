"""`kbuild clean`: drop the local state."""
from __future__ import annotations

import shutil

import click

from ..engine import BuildLocked
from ..engine.buildlock import BuildLock
from ..localstate import LocalState
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
    kept = {local.build_lock} | (set() if cache else {local.cache})  # the lock file is held while we clean
    try:
        with BuildLock(local.path):  # a build running now would lose its state under it
            for item in local.path.iterdir():
                if item not in kept:
                    shutil.rmtree(item) if item.is_dir() else item.unlink()
    except BuildLocked as exc:
        raise KbuildError(str(exc), LOCKED) from None
    click.echo(f"cleaned {local.path}" + ("" if cache else " (the call cache kept; --cache drops it too)"))
