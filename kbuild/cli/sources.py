"""`kbuild add`, `kbuild view add`, `kbuild spec add`: entries in a project's sources.yml, which
keeps the comments a person wrote."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..text.secrets import without_userinfo
from ..store.layout import BadId, check_id
from .session import WRONG, KbuildError, Session, pass_session

if TYPE_CHECKING:
    from ..store.sources import SpecRequest, ViewRequest

# kbuild.store.sources (pydantic, ruamel.yaml) is imported by the commands that use it: every
# other command starts faster without it


@click.command()
@click.argument("project")
@click.argument("paths_or_urls", metavar="PATH_OR_URL...", nargs=-1, required=True)
@click.option("--id", "source_id", help="The source's id (default: from its file name); with one path only.")
@pass_session
def add(session: Session, project: str, paths_or_urls: tuple[str, ...], source_id: str | None) -> None:
    """List a source in kb/PROJECT/sources.yml (creating the project), keeping its comments.

    Give several paths, or a folder (each document in it; hidden files and kbuild's own files
    aside), to list them all at once. A file outside the project is copied into sources/ first,
    so the project holds it. A path that cannot be listed gets one line and the others are listed
    (exit 2). A document whose name another source has gets a free id ("report-txt" beside
    "report"); one listed already stays as it is.

    Example: kbuild add payments docs/requirements.pdf --id requirements   (or: kbuild add payments docs/)
    """
    spec, app = _project(session, project)
    given = [p for arg in paths_or_urls for p in _documents(session.directory, arg, spec.root)]
    if source_id is not None and len(given) != 1:
        raise KbuildError(f"--id names one source, and {len(given)} were given; list them without --id", WRONG)
    if len(given) == 1:
        _add_one(session, spec.root, app.store.sources_file(project), given[0], source_id)
        return
    failed = 0
    for path_or_url in given:
        try:
            _add_one(session, spec.root, app.store.sources_file(project), path_or_url, None)
        except KbuildError as exc:  # one line, and the others are listed
            failed += 1
            click.echo(f"kbuild: {path_or_url}: {exc.format_message()}", err=True)
    if failed:
        raise KbuildError(f"{failed} of {len(given)} could not be listed (above); the others were", WRONG)


def _documents(directory: Path, arg: str, root: Path) -> list[str]:
    """`arg` itself, or for a folder each file in it that a converter reads (a format kbuild or
    a plug-in reads, not one it refuses), in path order; hidden files and folders, and the
    store's own folders, left out."""
    folder = directory / arg
    if "://" in arg or not folder.is_dir():
        return [arg]
    from ..buildfile import FILENAME as BUILDFILE
    from ..convert.formats import UNSUPPORTED, extension
    from ..engine.layout import LOCK_FILE
    from ..plugins import registry
    from ..records.checked import RECORD

    build_files = {BUILDFILE, LOCK_FILE, RECORD}  # a project root's files for kbuild, never its documents
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if any(p.startswith(".") for p in parts) or not path.is_file() or path.is_symlink():
            continue
        if path.resolve().is_relative_to(root / "kb") or path.resolve().is_relative_to(root / ".kbuild"):
            continue
        if path.parent.resolve() == root.resolve() and path.name in build_files:
            continue
        ext = extension(path.name)
        converter = registry().converter(ext)
        if converter is None or (converter.plugin.builtin and ext in UNSUPPORTED):
            continue
        found.append(str(path.relative_to(directory)) if path.is_relative_to(directory) else str(path))
    if not found:
        raise KbuildError(f"{arg} holds no document kbuild reads; give the files, or a folder that holds some", WRONG)
    return found


def _add_one(session: Session, root: Path, sources_file: str, path_or_url: str, source_id: str | None) -> None:
    from pydantic import ValidationError

    from ..store.sources import AlreadyListed, SourcesError, one_line, source_for
    from ..store.sources import add as add_entry

    try:
        wanted = source_for(path_or_url, session.directory, root, source_id)
        source = add_entry(root / sources_file, wanted, named=source_id is not None)
    except AlreadyListed as exc:  # as `git add` of a file added already: nothing to do
        click.echo(f"kbuild: {without_userinfo(str(exc))}; nothing to do")
        return
    except ValidationError as exc:
        raise KbuildError(one_line(exc), WRONG) from None
    except (BadId, SourcesError) as exc:
        raise KbuildError(without_userinfo(str(exc)), WRONG) from None
    if source.path is not None and not (session.directory / path_or_url).resolve().is_relative_to(root):
        click.echo(f"copied {path_or_url} to {source.path}, inside the project (commit it with the store)")
    taken = f" ({wanted.id!r} is another source's; `kbuild add --id` names it yourself)" if source.id != wanted.id else ""
    click.echo(f"added {source.id} to {sources_file}{taken}; run `kbuild` to build it")


@click.command()
@click.argument("project")
@click.argument("source")
@pass_session
def remove(session: Session, project: str, source: str) -> None:
    """Take a source out of kb/PROJECT/sources.yml; the next build removes its pages.

    Example: kbuild remove payments requirements
    """
    _remove(session, project, "sources", "id", source)
    click.echo(f"removed {source} from {project}; run `kbuild` to remove its pages")


def _remove(session: Session, project: str, section: str, key: str, value: str) -> None:
    from ..store.sources import SourcesError
    from ..store.sources import remove as remove_entry

    try:
        remove_entry(_project_sources(session, project), section, key, value)
    except SourcesError as exc:
        raise KbuildError(str(exc), WRONG) from None


def _project(session: Session, project: str) -> tuple[Any, Any]:
    """The Kbuildfile and its application, for a project name that is a valid id."""
    spec, _ = session.load()
    app = session.application(spec)
    try:
        check_id("project", project)
    except BadId as exc:
        raise KbuildError(str(exc), WRONG) from None
    return spec, app


def _project_sources(session: Session, project: str) -> Path:
    """The sources.yml of an existing project."""
    spec, app = _project(session, project)
    file = spec.root / app.store.sources_file(project)
    if not file.exists():
        raise KbuildError(f"{file} does not exist; `kbuild add {project} PATH` starts the project", WRONG)
    return file


def _add_request(file: Path, make: Callable[[], ViewRequest | SpecRequest]) -> None:
    from pydantic import ValidationError

    from ..store.sources import SourcesError
    from ..store.sources import add as add_entry

    try:
        add_entry(file, make())
    except SourcesError as exc:
        raise KbuildError(str(exc), WRONG) from None
    except ValidationError as exc:
        raise KbuildError(exc.errors()[0]["msg"].removeprefix("Value error, "), WRONG) from None


@click.group()
def view() -> None:
    """Views written on request (one feature, use case or question)."""


@view.command("add")
@click.argument("project")
@click.argument("name")
@click.option("--about", required=True, help="What the view is about: a feature, a use case or a question.")
@click.option("--across", multiple=True, help="Another project whose facts the view may draw on (repeatable).")
@pass_session
def view_add(session: Session, project: str, name: str, about: str, across: tuple[str, ...]) -> None:
    """Ask for a view NAME of PROJECT; the next build writes artifacts/views/NAME.md.

    Example: kbuild view add payments refunds --about "how refunds work and their limits"
    """
    from ..store.sources import ViewRequest

    file = _project_sources(session, project)
    unknown = [p for p in across if not (file.parent.parent / p / file.name).exists()]
    if unknown:
        raise KbuildError(f"--across {unknown[0]}: there is no project {unknown[0]!r} in {file.parent.parent.name}/; "
                          f"`kbuild add {unknown[0]} PATH` starts it", WRONG)
    _add_request(file, lambda: ViewRequest(name=name, about=about, across=list(across)))
    click.echo(f"added view {name} to {file.name} of {project}; run `kbuild` to write it")


@view.command("remove")
@click.argument("project")
@click.argument("name")
@pass_session
def view_remove(session: Session, project: str, name: str) -> None:
    """Take the view NAME out of PROJECT's sources.yml; the next build removes its page.

    Example: kbuild view remove payments refunds
    """
    _remove(session, project, "views", "name", name)
    click.echo(f"removed view {name} from {project}; run `kbuild` to remove its page")


@click.group()
def spec() -> None:
    """Specs: what a coding agent implements, written from a view."""


@spec.command("add")
@click.argument("project")
@click.argument("feature")
@click.option("--view", "view_name", required=True, help="The view the spec is written from.")
@pass_session
def spec_add(session: Session, project: str, feature: str, view_name: str) -> None:
    """Ask for a spec FEATURE of PROJECT from a view; the next build writes artifacts/specs/FEATURE.md.

    Example: kbuild spec add payments refund-api --view refunds
    """
    from ..store.sources import SpecRequest

    file = _project_sources(session, project)
    _add_request(file, lambda: SpecRequest(name=feature, view=view_name))
    click.echo(f"added spec {feature} (from view {view_name}) to {file.name} of {project}; run `kbuild` to write it")


@spec.command("remove")
@click.argument("project")
@click.argument("feature")
@pass_session
def spec_remove(session: Session, project: str, feature: str) -> None:
    """Take the spec FEATURE out of PROJECT's sources.yml; the next build removes its page.

    Example: kbuild spec remove payments refund-api
    """
    _remove(session, project, "specs", "name", feature)
    click.echo(f"removed spec {feature} from {project}; run `kbuild` to remove its page")
