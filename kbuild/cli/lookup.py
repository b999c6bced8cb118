"""`kbuild search`, `kbuild context`, `kbuild show`: reading the store."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from ..store.localstate import LocalState
from .jsonout import JsonCommand, emit, json_option
from .session import WRONG, KbuildError, Session, pass_session

if TYPE_CHECKING:
    from ..buildfile import Buildfile
    from ..retrieval.embedding import QuestionEmbedder
    from ..engine import Engine

T = TypeVar("T")


def by_meaning(look: Callable[[QuestionEmbedder | None], T], spec: Buildfile, engine: Engine,
               lexical: bool = False) -> T:
    """`look` up with the Kbuildfile's embedder (None when semantic ranking is off, or with
    `lexical`); an embedder that cannot work is one line and exit code 1, a project that is not
    one of the store's one line and exit code 2."""
    from ..retrieval.embedding import EmbeddingError
    from ..retrieval.search import UnknownProject, question_embedder

    try:
        return look(None if lexical else question_embedder(spec, engine))
    except EmbeddingError as exc:
        raise KbuildError(f"{exc}; or turn semantic ranking off in the Kbuildfile") from None
    except UnknownProject as exc:
        raise KbuildError(str(exc), WRONG) from None


@click.command("search", cls=JsonCommand)
@click.argument("query", required=False)
@click.option("--project", help="Search one project only (a folder under the store, by its name).")
@click.option("-n", "--limit", default=5, show_default=True)
@click.option("--open", "open_best", is_flag=True, help="Print the page behind the best hit.")
@click.option("--lexical", is_flag=True, help="Rank by words only, even when the Kbuildfile turns semantic ranking on.")
@click.option("--misses", is_flag=True, help="List logged queries that found nothing.")
@json_option
@pass_session
def search_command(session: Session, query: str | None, project: str | None, limit: int, open_best: bool,
                   misses: bool, lexical: bool, as_json: bool) -> None:
    """BM25 over the sections of the facts and their summaries (the index the build writes), then the other index lines; every lookup is logged.

    Example: kbuild search "how long do refunds take" --open
    """
    from ..services.answers import misses_answer, search_answer
    from ..retrieval.search import log_lookup, search, store_folder
    from ..retrieval.search import misses as logged_misses

    spec, engine = session.load()
    lookups = LocalState(engine.state_dir).lookups
    if misses:
        records = logged_misses(lookups)
        if as_json:
            emit(misses_answer(records))
            return
        for record in records:
            click.echo(f"{record['at']}  {record['query']}" + (f"  (project {record['project']})" if record["project"] else ""))
        return
    if not query:
        raise KbuildError("give a query, or --misses", WRONG)
    hits = by_meaning(lambda embedder: search(store_folder(spec), spec.root, query, project, limit, embedder),
                      spec, engine, lexical)
    log_lookup(lookups, query, project, hits)
    if as_json:
        answer = search_answer(query, project, hits)
        if open_best and hits:
            answer["open"] = {"page": hits[0].page, "text": (spec.root / hits[0].page).read_text(errors="replace")}
        emit(answer)
        return
    if not hits:
        click.echo("nothing in the store matches; this is a gap (logged: `kbuild search --misses`)")
        return
    for n, hit in enumerate(hits):
        if n and hit.ranked_by != hits[n - 1].ranked_by:  # another ranking: its scores are on another scale
            click.echo("other pages, ranked by their index lines (scores on their own scale):")
        click.echo(f"{hit.score:6.2f}  {hit.page}\n        {hit.line[:200]}")
    if open_best:
        click.echo("\n" + (spec.root / hits[0].page).read_text())


@click.command(cls=JsonCommand)
@click.argument("question")
@click.option("--project", help="Draw on one project only (a folder under the store, by its name).")
@click.option("--budget", default=4000, show_default=True, help="Tokens the context may print, everything counted.")
@click.option("--trace", is_flag=True, help="Print (to stderr) why each section was chosen: its score, tokens and "
              "matched words (with semantic ranking on, its place by words and by meaning).")
@click.option("--history", is_flag=True, help="Include notes that were superseded or withdrawn (each says which "
                                              "note replaced it).")
@click.option("--lexical", is_flag=True, help="Rank by words only, even when the Kbuildfile turns semantic ranking on.")
@json_option
@pass_session
def context(session: Session, question: str, project: str | None, budget: int, trace: bool, history: bool,
            lexical: bool, as_json: bool) -> None:
    """Compose a context for a coding agent from the store, within a token budget.

    Example: kbuild context "how are refunds limited?" --budget 2000 > context.md
    """
    from ..services.answers import context_answer
    from ..retrieval.search import compose, log_lookup, render_context, store_folder

    spec, engine = session.load()
    kept, summarised, lines = by_meaning(
        lambda embedder: compose(store_folder(spec), spec.root, question, budget, project, history=history,
                                 embedder=embedder),
        spec, engine, lexical)
    log_lookup(LocalState(engine.state_dir).lookups, question, project, [h for s in kept + summarised for h in s.hits])
    text = render_context(question, kept, summarised)
    if as_json:
        emit(context_answer(question, project, budget, kept, summarised, lines, text))
        return
    click.echo(text, nl=False)
    if trace:
        click.echo("\n".join(lines), err=True)


@click.command(cls=JsonCommand)
@click.argument("path", type=click.Path(path_type=Path))
@json_option
@pass_session
def show(session: Session, path: Path, as_json: bool) -> None:
    """Print a page with its parent and children, to walk the store up and down.

    Example: kbuild show kb/shop/facts/payments/index.md
    """
    from ..services.answers import show_answer
    from ..services.browse import NotAPage, open_page

    spec, _ = session.load()
    try:
        page = open_page(path if path.is_absolute() else session.directory / path, spec.store, spec.root)
    except NotAPage as exc:
        raise KbuildError(str(exc), WRONG) from None
    if as_json:
        emit(show_answer(page))
        return
    click.echo(page.text.rstrip())
    if page.parent is not None:
        click.echo(f"\nparent: {page.parent}")
    if page.children:
        click.echo("children: " + ", ".join(page.children))
