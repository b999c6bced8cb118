"""`kbuild eval`: recall of `kbuild context` at token budgets, over a file of questions."""
from __future__ import annotations

from pathlib import Path

import click

from .jsonout import JsonCommand, emit, json_option
from .session import Session, pass_session


@click.command("eval", cls=JsonCommand)
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--project", help="Draw on one project only.")
@click.option("--budget", "budgets", type=int, multiple=True,
              help="A token budget (repeatable; default 2,500, 5,000, 10,000 and 15,000).")
@click.option("--no-misses", is_flag=True, help="Print the table only.")
@click.option("--lexical", is_flag=True, help="Rank by words only, even when the Kbuildfile turns semantic ranking on.")
@json_option
@pass_session
def eval_command(session: Session, questions: Path, project: str | None, budgets: tuple[int, ...],
                 no_misses: bool, lexical: bool, as_json: bool) -> None:
    """Recall at budget: the share of QUESTIONS whose answer regex is in the composed context.

    Example: kbuild eval tests/data/retrieval-questions.json
    """
    from ..retrieval.evaluate import BUDGETS, eval_answer, evaluate, load_questions, render_report
    from ..retrieval.search import store_folder
    from .lookup import by_meaning

    spec, engine = session.load()
    asked = load_questions(questions)
    results = by_meaning(lambda embedder: evaluate(store_folder(spec), spec.root, asked, budgets or BUDGETS, project,
                                                   embedder), spec, engine, lexical)
    if as_json:
        emit(eval_answer(results))
        return
    click.echo(render_report(results, misses=not no_misses), nl=False)
