"""`kbuild merge-lock`: git's merge driver for kbuild.lock."""
from __future__ import annotations

from pathlib import Path

import click

from .session import FAILED, KbuildError

FILE = click.Path(dir_okay=False, path_type=Path)


@click.command(name="merge-lock")
@click.argument("base", type=FILE)
@click.argument("ours", type=FILE)
@click.argument("theirs", type=FILE)
def merge_lock(base: Path, ours: Path, theirs: Path) -> None:
    """Merge two sides of kbuild.lock into OURS, as git's merge driver (%O %A %B).

    The union of what each side rebuilt; an entry both sides changed is taken from ours and
    marked to run again, so the next `kbuild` ends as a clean build of the merged sources.
    Exit 1 (a conflict, for git) when a side is not a lock this kbuild wrote.

    Example: git config merge.kbuild-lock.driver "kbuild merge-lock %O %A %B"
    """
    from ..engine.files import atomic_write
    from ..engine.lockmerge import NotALock, merge_locks

    try:
        data = [p.read_bytes() if p.exists() or p != base else b"" for p in (base, ours, theirs)]
    except OSError as exc:
        raise KbuildError(f"cannot read {exc.filename}: {exc.strerror or exc}", FAILED) from None
    try:
        merged = merge_locks(*data)
    except NotALock as exc:
        raise KbuildError(f"cannot merge kbuild.lock: {exc}; our side is kept: take either side "
                          "(git checkout --ours or --theirs -- kbuild.lock) and run `kbuild`", FAILED) from None
    try:
        atomic_write(ours, merged.data)
    except OSError as exc:
        raise KbuildError(f"cannot write {ours}: {exc.strerror or exc}", FAILED) from None
    stale = f"; {len(merged.stale)} changed on both sides, run again by the next `kbuild`" if merged.stale else ""
    click.echo(f"kbuild.lock merged: {len(merged.from_ours)} entries from ours, {len(merged.from_theirs)} "
               f"from theirs{stale}", err=True)
