"""`kbuild merge-lock`: git's merge driver for kbuild.lock."""
from __future__ import annotations

from pathlib import Path

import click

from .session import FAILED, WRONG, KbuildError

FILE = click.Path(dir_okay=False, path_type=Path)


@click.command(name="merge-lock")
@click.argument("base", type=FILE, required=False)
@click.argument("ours", type=FILE, required=False)
@click.argument("theirs", type=FILE, required=False)
@click.pass_context
def merge_lock(ctx: click.Context, base: Path | None, ours: Path | None, theirs: Path | None) -> None:
    """Merge two sides of kbuild.lock into OURS, as git's merge driver (%O %A %B).

    The union of what each side rebuilt; an entry both sides changed is taken from ours and
    marked to run again, so the next `kbuild` ends as a clean build of the merged sources.
    Exit 1 (a conflict, for git) when a side is not a lock this kbuild wrote.

    With no arguments, during a merge git left kbuild.lock conflicted in (its driver was not
    registered: a fresh clone): merge the sides git kept in its index the same way, and stage it.

    Example: git config merge.kbuild-lock.driver "kbuild merge-lock %O %A %B"
    """
    from ..engine.lockfile import take_a_side
    from ..engine.lockmerge import NotALock

    if base is None or ours is None or theirs is None:
        if base is not None:
            raise KbuildError("give BASE, OURS and THEIRS (as git's driver does), or nothing to merge the kbuild.lock "
                              "git left conflicted", WRONG)
        return _merge_conflicted_locks(ctx.obj.directory if ctx.obj is not None else Path("."))
    try:
        data = [p.read_bytes() if p.exists() or p != base else b"" for p in (base, ours, theirs)]
    except OSError as exc:
        raise KbuildError(f"cannot read {exc.filename}: {exc.strerror or exc}", FAILED) from None
    try:
        said = _merge_into(ours, *data)
    except NotALock as exc:
        raise KbuildError(f"cannot merge kbuild.lock: {exc}; our side is kept: {take_a_side()}", FAILED) from None
    click.echo(f"kbuild.lock merged: {said}", err=True)


def _merge_into(ours: Path, base_data: bytes, ours_data: bytes, theirs_data: bytes) -> str:
    """Write the merge of the three sides into `ours`; what was taken from where. NotALock as merge_locks."""
    from ..engine.files import atomic_write
    from ..engine.lockmerge import merge_locks

    merged = merge_locks(base_data, ours_data, theirs_data)
    try:
        atomic_write(ours, merged.data)
    except OSError as exc:
        raise KbuildError(f"cannot write {ours}: {exc.strerror or exc}", FAILED) from None
    stale = f"; {len(merged.stale)} changed on both sides, run again by the next `kbuild`" if merged.stale else ""
    return f"{len(merged.from_ours)} entries from ours, {len(merged.from_theirs)} from theirs{stale}"


def _merge_conflicted_locks(directory: Path) -> None:
    """Merge each lock file git lists as unmerged from the stages it keeps (1 the common ancestor,
    2 ours, 3 theirs), write it, and `git add` it, as the driver would have."""
    import subprocess

    from ..engine.lockfile import take_a_side
    from ..engine.lockmerge import NotALock

    def git(*args: str) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(["git", "-C", str(top), *args], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise KbuildError(f"git could not run: {exc}", FAILED) from None

    top = directory
    found = git("rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise KbuildError(f"{directory.resolve()} is not in a git repository: nothing conflicted to merge; give BASE, "
                          "OURS and THEIRS", WRONG)
    top = Path(found.stdout.decode().strip())
    stages: dict[str, dict[int, bytes]] = {}
    for record in git("ls-files", "-u", "-z").stdout.split(b"\0"):
        info, _, name = record.decode("utf-8", "surrogateescape").partition("\t")
        path = Path(name)
        if name and (path.name == "kbuild.lock" or (path.parent.name == "kbuild.lock.d" and path.suffix == ".lock")):
            stage = int(info.split()[2])
            shown = git("show", f":{stage}:{name}")
            if shown.returncode == 0:
                stages.setdefault(name, {})[stage] = shown.stdout
    if not stages:
        raise KbuildError(f"git holds no conflicted kbuild.lock to merge (no merge under way, or it was added since): "
                          f"{take_a_side()}", FAILED)
    for name, sides in sorted(stages.items()):
        if 2 not in sides or 3 not in sides:
            raise KbuildError(f"{name}: one side of the merge removed it: {take_a_side(name)}", FAILED)
        try:
            said = _merge_into(top / name, sides.get(1, b""), sides[2], sides[3])
        except NotALock as exc:
            raise KbuildError(f"cannot merge {name}: {exc}: {take_a_side(name)}", FAILED) from None
        if git("add", "--", name).returncode != 0:
            raise KbuildError(f"{name} merged ({said}) but `git add {name}` failed: run it", FAILED)
        click.echo(f"{name} merged from the two sides git kept, and staged: {said}")
    click.echo("next: kbuild, then commit the merge")


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
