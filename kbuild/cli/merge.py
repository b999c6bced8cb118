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


@click.command(name="merge-sources")
@click.argument("base", type=FILE)
@click.argument("ours", type=FILE)
@click.argument("theirs", type=FILE)
@click.argument("path", required=False, default="sources.yml")
def merge_sources(base: Path, ours: Path, theirs: Path, path: str) -> None:
    """Merge two sides of a sources.yml into OURS entry by entry, as git's merge driver (%O %A %B %P).

    The sources, views and specs each side added, changed or removed are kept, with their
    comments; an entry both sides changed differently is a conflict (exit 1), left between
    git's markers for a person to resolve.

    Example: git config merge.kbuild-sources.driver "kbuild merge-sources %O %A %B %P"
    """
    from ..engine.files import atomic_write
    from ..store.sourcesmerge import Unmergeable, merge_listings, text_merge

    try:
        base_text, ours_text, theirs_text = (p.read_text("utf-8") if p.exists() or p != base else ""
                                             for p in (base, ours, theirs))
    except (OSError, UnicodeDecodeError) as exc:
        raise KbuildError(f"cannot read a side of {path}: {exc}", FAILED) from None
    try:
        merged = merge_listings(base_text, ours_text, theirs_text)
        text, conflicts, why = merged.text, merged.conflicts, ""
    except Unmergeable as exc:  # merged as text instead: git's markers show both sides
        as_text = text_merge(base_text, ours_text, theirs_text)
        text, conflicts, why = (ours_text if as_text is None else as_text[0]), ["the whole file"], f" ({exc})"
    try:
        atomic_write(ours, text.encode("utf-8"))
    except OSError as exc:
        raise KbuildError(f"cannot write {ours}: {exc.strerror or exc}", FAILED) from None
    if conflicts:
        raise KbuildError(f"{path}: {', '.join(conflicts)} changed on both sides{why}; keep what you want between "
                          f"the conflict markers, then `git add {path}`", FAILED)
    taken = f"{len(merged.from_theirs)} entries from theirs" if merged.from_theirs else "nothing new from theirs"
    click.echo(f"{path} merged: {taken}", err=True)
