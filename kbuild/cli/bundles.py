"""`kbuild export`, `kbuild import`: a project's facts, notes and tombstones as a bundle that
travels to another store (kbuild/notes/bundle.py)."""
from __future__ import annotations

from pathlib import Path

import click

from .session import FAILED, WRONG, KbuildError, Session, pass_session


@click.command()
@click.argument("project")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option("--raw", "with_raw", is_flag=True, help="Include the sources' raw copies (never one holding a secret).")
@pass_session
def export(session: Session, project: str, bundle: Path, with_raw: bool) -> None:
    """Write PROJECT's facts, notes, tombstones and source descriptions to BUNDLE (a new folder, or NAME.tar.gz).

    Example: kbuild export payments payments-bundle.tar.gz --raw
    """
    from ..notes.bundle import BundleError
    from ..notes.bundle import export as write_bundle

    spec, _ = session.load()
    app = session.application(spec)
    try:
        manifest = write_bundle(spec.root, app.store, project, session.directory / bundle, with_raw)
    except BundleError as exc:
        raise KbuildError(str(exc), WRONG) from None
    counts = ", ".join(f"{n} {what}" for what, n in manifest.counts.items())
    click.echo(f"exported {project} to {bundle}: {counts}")


@click.command("import")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option("--project", help="Import into this project (default: the bundle's).")
@click.option("--dry-run", is_flag=True, help="Show what it would add, the conflicts and the missing sources; "
                                              "write nothing.")
@pass_session
def import_command(session: Session, bundle: Path, project: str | None, dry_run: bool) -> None:
    """Merge a bundle into the store by id and hash: a conflict is kept for a person, never overwritten.

    Example: kbuild import payments-bundle.tar.gz --dry-run   (then: kbuild import ... && kbuild)
    """
    from ..notes.bundle import BundleError, ImportFailed, apply_import, plan_import, read_bundle
    from ..store.layout import BadId, check_id

    spec, _ = session.load()
    app = session.application(spec)
    try:
        if project is not None:
            check_id("project", project)
        found = read_bundle(session.directory / bundle)
        plan = plan_import(spec.root, app.store, found, project)
    except (BundleError, BadId) as exc:
        raise KbuildError(str(exc), WRONG) from None
    would = "would " if dry_run else ""
    click.echo(f"bundle of {found.manifest.project} (kbuild {found.manifest.kbuild}) into {plan.project}:")
    for note in plan.add_notes:
        click.echo(f"  {would}add note {note}")
    for source in plan.add_sources:
        click.echo(f"  {would}add source {source}")
    for stone in plan.tombstones:
        click.echo(f"  {would}add the tombstone of {stone.id}")
    for line in plan.missing_sources:
        click.echo(f"  missing: {line}")
    for line in plan.conflicts:
        click.echo(f"  conflict: {line}")
    click.echo(f"  {len(plan.same)} sources and notes the same here; facts: {plan.facts_same} the same, "
               f"{len(plan.facts_differ)} with other words here, {plan.facts_unbuilt} not built here")
    for fact in plan.facts_differ:
        click.echo(f"  differs: fact {fact}")
    if dry_run:
        return
    try:
        apply_import(spec.root, app.store, plan)
    except BundleError as exc:
        raise KbuildError(str(exc), WRONG) from None
    except ImportFailed as exc:
        raise KbuildError(str(exc), FAILED) from None
    click.echo("run `kbuild` to build what it added" + ("; `kbuild check` lists the conflicts" if plan.conflicts else ""))
    if plan.conflicts or plan.missing_sources:
        raise click.exceptions.Exit(FAILED)
