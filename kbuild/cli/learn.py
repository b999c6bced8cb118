"""`kbuild learn`, `kbuild confirm`, `kbuild forget`: knowledge from work, written back as notes
(docs/learning.md). None of them builds; run `kbuild` after them (`forget` builds itself, so that
no page keeps the forgotten text)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .jsonout import JsonCommand, emit, json_option
from .session import FAILED, WRONG, KbuildError, Session, pass_session

from ..store.writelock import editing

if TYPE_CHECKING:
    from ..buildfile import Buildfile
    from ..notes.learning import Delta
    from ..store.layout import Store


def read_delta(text: str, where: str) -> Delta:
    """A delta from its JSON, or one line saying what is wrong with it."""
    from ..notes.learning import BadDelta, parse_delta

    try:
        return parse_delta(text, where)
    except BadDelta as exc:
        raise KbuildError(str(exc), WRONG) from None


@click.command(cls=JsonCommand)
@click.argument("delta_file", metavar="DELTA", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Show what the delta would change, and change nothing.")
@json_option
@pass_session
def learn(session: Session, delta_file: Path, dry_run: bool, as_json: bool) -> None:
    """Apply a delta (JSON, docs/learning.md) of notes learned while working: add, append, supersede, withdraw.

    Each action names the revision of its note it was written against; a delta whose base is
    not the revision on disk is refused whole, with the note's current text. `-` reads stdin.

    Example: kbuild learn delta.json --dry-run   (then: kbuild learn delta.json && kbuild)
    """
    from ..notes.learning import DeltaRefused, learn_answer, plan_and_apply, plan_delta

    spec, _ = session.load()
    app = session.application(spec)
    try:
        text = click.get_text_stream("stdin").read() if str(delta_file) == "-" else \
            (session.directory / delta_file).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KbuildError(f"cannot read {delta_file} ({exc.__class__.__name__}); give the path of a delta", WRONG) from None
    delta = read_delta(text, str(delta_file))
    try:
        plan = plan_delta(spec.root, app.store, delta) if dry_run else plan_and_apply(spec.root, app.store, delta)
    except DeltaRefused as exc:
        if exc.current is not None and not as_json:
            click.echo(exc.current, err=True, nl=False)
        if as_json:
            emit({"schema": "kbuild.error/1", "error": str(exc), "exit_code": FAILED, "note": exc.note,
                  "revision": exc.revision, "current": exc.current})
            raise click.exceptions.Exit(FAILED) from None
        raise KbuildError(str(exc), FAILED) from None
    if as_json:
        emit(learn_answer(plan, not dry_run))
        return
    for step in plan.steps:
        click.echo(f"{'would ' if dry_run else ''}{step.action} {step.note}: revision {step.from_revision} -> "
                   f"{step.to_revision}, {step.status} ({step.path})")
    if not dry_run:
        click.echo("run `kbuild` to build the notes' pages")


def _who(given: str | None) -> str:
    """Who confirms: --by, else $KBUILD_USER, else git's user.name, else the login name."""
    if given:
        return given
    if os.environ.get("KBUILD_USER"):
        return os.environ["KBUILD_USER"]
    import subprocess

    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    if name:
        return name
    import getpass

    return getpass.getuser()


def find_note(spec: Buildfile, app: Any, name: str) -> tuple[str, str]:
    """(project, note id) for ID or PROJECT/ID; one line when there is none or more than one."""
    from ..store.layout import BadId, check_id

    project, _, note = name.rpartition("/")
    try:
        check_id("note", note)
        projects = [check_id("project", project)] if project else app.projects()
    except BadId as exc:
        raise KbuildError(str(exc), WRONG) from None
    found = [p for p in projects if (spec.root / app.store.note(p, note)).is_file()]
    if not found:
        raise KbuildError(f"no note {name!r} in {', '.join(projects) or 'the store'}; `kbuild status` lists the notes",
                          WRONG)
    if len(found) > 1:
        raise KbuildError(f"note {note!r} is in {', '.join(found)}; name it as PROJECT/{note}", WRONG)
    return found[0], note


@click.command()
@click.argument("note_id", metavar="ID")
@click.option("--by", "by", help="Who confirms it (default: $KBUILD_USER, git's user.name, the login name).")
@pass_session
def confirm(session: Session, note_id: str, by: str | None) -> None:
    """Confirm a candidate note (ID or PROJECT/ID): its pages no longer warn that it is unconfirmed.

    Confirming a note that needs review records its evidence as it is now.

    Example: kbuild confirm refund-days --by alice   (then: kbuild)
    """
    spec, _ = session.load()
    app = session.application(spec)
    project, note_id = find_note(spec, app, note_id)
    with editing(spec.root / app.store.project(project)):  # read and written whole: no change made meanwhile is lost
        _confirm(spec.root, app.store, project, note_id, _who(by))


def _confirm(root: Path, store: Store, project: str, note_id: str, who: str) -> None:
    from ..engine import atomic_write
    from ..notes import note as notes

    try:
        note = notes.read(root, store, project, note_id)
    except notes.NoteError as exc:
        raise KbuildError(str(exc), WRONG) from None
    if note is None:
        raise KbuildError(f"note {note_id} was forgotten meanwhile; `kbuild status` lists the notes", WRONG)
    header = note.header
    if header.status not in notes.CURRENT:
        raise KbuildError(f"note {note_id} is {header.status}; only a current note can be confirmed", WRONG)
    changed = notes.changed_evidence(root, header)
    if header.status == "confirmed" and not changed:
        click.echo(f"{note_id} is confirmed already (by {header.confirmed_by})")
        return
    revision = header.revision + 1
    evidence = [e.model_copy(update={"hash": notes.file_hash(root / e.path)}) for e in header.evidence]
    event = notes.Event(action="confirm", revision=revision, at=notes.now(), by=who, origin="user")
    updated = header.model_copy(update={"revision": revision, "status": "confirmed", "confirmed_by": who,
                                        "evidence": evidence, "history": [*header.history, event]})
    atomic_write(root / store.note(project, note_id), notes.render(note.model_copy(update={"header": updated})).encode())
    click.echo(f"confirmed {project}/{note_id} (revision {revision}, by {who}); run `kbuild` to update its pages")


@click.command()
@click.argument("note_id", metavar="ID")
@click.option("--by", "by", help="Who forgets it (default: $KBUILD_USER, git's user.name, the login name).")
@click.option("--reason", help="Why, kept in the tombstone (not the note's words).")
@click.pass_context
def forget(ctx: click.Context, note_id: str, by: str | None, reason: str | None) -> None:
    """Forget a note (ID or PROJECT/ID): a tombstone replaces it, and the build it runs removes
    or rebuilds every page built on it; cached and logged calls holding its words are deleted.

    Example: kbuild forget refund-days --reason "said in error"
    """
    from ..notes import note as notes
    from ..engine.layout import FOLDER
    from ..notes.forgetting import Forgotten, Tombstone, fingerprints, purge_call_cache, write_tombstone
    from ..store.localstate import LocalState
    from ..model.calllog import CallLog
    from ..store.sources import SourcesError, remove
    from .build import build

    session: Session = ctx.obj
    spec, engine = session.load()
    app = session.application(spec)
    project, note_id = find_note(spec, app, note_id)
    path = spec.root / app.store.note(project, note_id)
    with editing(spec.root / app.store.project(project)):  # no learn or confirm writes the note meanwhile
        try:
            note = notes.parse(path.read_bytes(), app.store.note(project, note_id))
            words = f"{note.header.title}\n{note.body}"
            revision = note.header.revision
        except notes.NoteError:  # a broken note is forgotten all the same, by its words
            words, revision = path.read_text("utf-8", errors="replace"), 0
        except FileNotFoundError:
            raise KbuildError(f"note {note_id} was forgotten meanwhile", WRONG) from None
        prints = fingerprints(words)
        try:
            remove(spec.root / app.store.sources_file(project), "sources", "id", note_id)
        except SourcesError:
            pass  # not listed (any more): its file and copies still go
        write_tombstone(spec.root, app.store, project, Tombstone(id=note_id, forgotten_at=notes.now(), by=_who(by),
                                                                 reason=reason, revision=revision, sentences=prints))
        path.unlink()
        restored = notes.unlink_forgotten(spec.root, app.store, project, note_id, _who(by))
    forgotten = Forgotten(prints)
    cached = purge_call_cache(engine.cache_dir, forgotten)
    log = LocalState(spec.root / FOLDER).call_log
    logged = CallLog(log).remove(forgotten.carried_in_json) if log.exists() else 0
    click.echo(f"forgot {project}/{note_id}: a tombstone in {app.store.tombstones(project)}, {cached} cached calls and "
               f"{logged} logged calls deleted" + (f"; {', '.join(restored)} no longer in a chain with it" if restored
                                                    else "") + "; building")
    ctx.invoke(build)
