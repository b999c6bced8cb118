"""`kbuild search`, `kbuild context`, `kbuild show`: reading the store."""
from __future__ import annotations

from pathlib import Path

import click

from ..buildfile import Buildfile
from ..localstate import LocalState
from .session import WRONG, KbuildError, Session, pass_session


def _store_folder(spec: Buildfile) -> Path:
    """Where the index pages are: the knowledge base's store, or kb/ as `kbuild init` makes it."""
    return spec.root / (spec.application.store.root if spec.application is not None else "kb")


@click.command("search")
@click.argument("query", required=False)
@click.option("--project", help="Search one project only.")
@click.option("-n", "--limit", default=5, show_default=True)
@click.option("--open", "open_best", is_flag=True, help="Print the page behind the best hit.")
@click.option("--misses", is_flag=True, help="List logged queries that found nothing.")
@pass_session
def search_command(session: Session, query: str | None, project: str | None, limit: int, open_best: bool,
                   misses: bool) -> None:
    """BM25 over every index line (the summaries); every lookup is logged.

    Example: kbuild search "how long do refunds take" --open
    """
    from ..search import log_lookup, search
    from ..search import misses as logged_misses

    spec, engine = session.load()
    lookups = LocalState(engine.state_dir).lookups
    if misses:
        for record in logged_misses(lookups):
            click.echo(f"{record['at']}  {record['query']}" + (f"  (project {record['project']})" if record["project"] else ""))
        return
    if not query:
        raise KbuildError("give a query, or --misses", WRONG)
    hits = search(_store_folder(spec), spec.root, query, project, limit)
    log_lookup(lookups, query, project, hits)
    if not hits:
        click.echo("nothing in the store matches; this is a gap (logged: `kbuild search --misses`)")
        return
    for hit in hits:
        click.echo(f"{hit.score:6.2f}  {hit.page}\n        {hit.line[:200]}")
    if open_best:
        click.echo("\n" + (spec.root / hits[0].page).read_text())


@click.command()
@click.argument("question")
@click.option("--project", help="Draw on one project only.")
@click.option("--budget", default=4000, show_default=True, help="Tokens the context may use (one section may overflow it).")
@click.option("--trace", is_flag=True, help="Print the ranking, token counts and what was left out.")
@pass_session
def context(session: Session, question: str, project: str | None, budget: int, trace: bool) -> None:
    """Compose a context for a coding agent from the store, within a token budget.

    Example: kbuild context "how are refunds limited?" --budget 2000 > context.md
    """
    from ..search import compose, log_lookup

    spec, engine = session.load()
    kept, summarised, lines = compose(_store_folder(spec), spec.root, question, budget, project)
    log_lookup(LocalState(engine.state_dir).lookups, question, project, [h for s in kept + summarised for h in s.hits])
    if not kept:
        click.echo(f"# Context: {question}\n\nNothing in the store speaks to this: a gap. "
                   "Add a source that does (`kbuild add`), rather than guessing.")
    else:
        click.echo(f"# Context: {question}\n")
        for section in kept:
            click.echo(section.text + "\n")
        if summarised:
            click.echo("## Also relevant (summaries)\n")
            for section in summarised:
                for hit in section.hits:
                    click.echo(hit.line)
    if trace:
        click.echo("\n".join(lines), err=True)


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@pass_session
def show(session: Session, path: Path) -> None:
    """Print a page with its parent and children, to walk the store up and down.

    Example: kbuild show kb/shop/facts/payments/index.md
    """
    from ..browse import children, parent

    spec, _ = session.load()
    page = (path if path.is_absolute() else (session.directory / path)).resolve()
    if not page.is_relative_to(spec.store.resolve()) or not page.is_file():
        # resolved first: a link inside the store may lead anywhere
        raise KbuildError(f"{path} is not a page of the store; `kbuild show kb/index.md` starts at the top", WRONG)
    text = page.read_text(errors="replace")
    click.echo(text.rstrip())
    above = parent(page, spec.root)
    if above is not None:
        click.echo(f"\nparent: {above}")
    below = children(page, text, spec.root)
    if below:
        click.echo("children: " + ", ".join(below))
