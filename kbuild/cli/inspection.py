"""`kbuild status`, `kbuild explain`, `kbuild graph`, `kbuild logs`: what was built, what is stale, and why."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..services.graphtext import FORMATS, Format
from .jsonout import JsonCommand, emit, json_option
from .session import WRONG, KbuildError, Session, pass_session

if TYPE_CHECKING:
    from ..buildfile import Buildfile


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_session
def status(session: Session, as_json: bool) -> None:
    """What is stale, grouped by what changed, and what a build would run.

    Example: kbuild status --json
    """
    # Nothing changed since a build that left every query settled (kbuild.uptodate): nothing is
    # stale and every target is built, which the stat of each file says without the Kbuildfile.
    up_to_date = {"causes": {}, "new": []}
    if session.settled_queries() is not None and not _has_notes(session):
        click.echo(json.dumps(up_to_date, indent=2, sort_keys=True) if as_json else "up to date: nothing would run")
        return
    from ..services.status import status as read_status

    spec, engine = session.load()
    found = read_status(engine, session.targets(spec))
    if as_json:
        click.echo(json.dumps(found.as_json(), indent=2, sort_keys=True))
        return
    _notes(spec)
    if found.up_to_date:
        click.echo("up to date: nothing would run")
        return
    for group in found.groups:
        pages = group.pages
        click.echo(group.cause)
        click.echo(f"  {len(group.queries)} queries stale, {len(pages)} pages" + (": " if pages else "")
                   + ", ".join(pages[:6]) + (" ..." if len(pages) > 6 else ""))
    for qid in found.new:
        click.echo(f"{qid}: not built yet")
    click.echo(f"a build checks these {len(found.stale) + len(found.new)} queries and runs those whose reads come out changed")
    click.echo(found.estimate)


def _has_notes(session: Session) -> bool:
    """Whether the store may hold notes (kb/PROJECT/notes/), seen without loading the Kbuildfile."""
    path = session.kbuildfile()
    return path is not None and any(path.parent.glob("*/*/notes/*.md"))


def _notes(spec: Buildfile) -> None:
    """One line per note that needs review, and how many notes are candidates (kbuild.notes.note)."""
    from ..notes.note import note_statuses

    app = spec.application
    if app is None:
        return
    statuses = note_statuses(spec.root, app.store, app.projects())
    for path, status, changed in statuses:
        if status == "needs-review":
            click.echo(f"{path}: needs review: its evidence {', '.join(changed)} changed since it was written")
    if statuses:
        counts = {s: sum(1 for _, got, _ in statuses if got == s) for s in
                  ("candidate", "confirmed", "needs-review", "superseded", "withdrawn")}
        click.echo("notes: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))


@click.command(cls=JsonCommand)
@click.argument("what")
@json_option
@pass_session
def explain(session: Session, what: str, as_json: bool) -> None:
    """Why a query or a generated file would rebuild, what it read and what reads it.

    WHAT is a query id as `kbuild graph` prints it, or the path of a file a query wrote.

    Example: kbuild explain kb/shop/facts/payments/refunds.md
    """
    from ..services.status import explain as explain_query

    spec, engine = session.load()
    found = explain_query(engine, session.targets(spec), session.page(spec, what))
    if found is None:
        raise KbuildError(f"{what} is neither a recorded query nor a file one wrote; `kbuild graph` lists them", WRONG)
    if as_json:
        from ..services.answers import explain_answer

        return emit(explain_answer(found))
    click.echo(f"{found.query}  (rule {found.rule})")
    click.echo(f"  {'would run: ' + found.would_run.sentence if found.would_run else 'up to date'}")
    for path in found.writes:
        click.echo(f"  writes {path}")
    for dep, would_run in found.reads:
        click.echo(f"  {'*' if would_run else ' '} reads {dep}")
    for reader in found.read_by:
        click.echo(f"    read by {reader}")
    last = found.last_run
    if last is not None:
        click.echo(f"  last ran in the build of {last.build}: {last.reason}")
        if last.verdict:
            verdict = "same: the old text was kept" if last.verdict.same else "different"
            click.echo(f"  cutoff: {verdict} (stage {last.verdict.stage}, p={last.verdict.probability}: "
                       f"{last.verdict.reason})")
        elif last.unchanged:
            click.echo("  cutoff: its new value was byte for byte the old one")


@click.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="dot", show_default=True)
@click.option("--no-files", is_flag=True, help="Leave input files out; show queries only.")
@click.argument("page", required=False)
@pass_session
def graph(session: Session, fmt: Format, no_files: bool, page: str | None) -> None:
    """Print the recorded dependency graph (edges point from a query to what it read), whole or
    around one PAGE (a generated file or a query id): what it is built on and what is built on it.

    Example: kbuild graph --format mermaid kb/shop/artifacts/views/digest.md
    """
    from ..engine import to_graph
    from ..services.graphtext import around, render
    from ..services.status import find_query

    spec, engine = session.load()
    memos = engine.memos()
    g = to_graph(memos, files=not no_files)
    if page is not None:
        qid = find_query(memos, session.page(spec, page))
        if qid is None:
            raise KbuildError(f"{page} is neither a recorded query nor a file one wrote", WRONG)
        g = around(g, qid)
    click.echo(render(g, fmt))


@click.command()
@click.option("-n", "--limit", default=20, show_default=True, help="How many calls, newest last.")
@click.option("--query", "query", help="Only calls made for queries whose id contains this.")
@click.option("--errors", is_flag=True, help="Only replies that failed (did not fit their schema).")
@click.option("--full", is_flag=True, help="Show each prompt and response in full.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines: one kbuild.call/1 object per call, none when no call is logged.")
@pass_session
def logs(session: Session, limit: int, query: str | None, errors: bool, full: bool, as_json: bool) -> None:
    """Every model call: prompt, response, tokens, latency, cost, and whether the cache answered.

    Example: kbuild logs -n 5 --full
    """
    from dataclasses import asdict

    from ..store.localstate import LocalState
    from ..model.calllog import CallLog

    _, engine = session.load()
    if not LocalState(engine.state_dir).call_log.exists():
        if not as_json:  # JSON Lines: no call, no line
            click.echo("no model calls logged yet (the offline backend makes none)")
        return
    for call in CallLog.for_root(engine.state_dir).rows(limit, query, errors):
        if as_json:
            click.echo(json.dumps({"schema": "kbuild.call/1", **asdict(call)}, sort_keys=True))
            continue
        hit = "cache" if call.cache_hit else f"{call.latency_ms:.0f} ms"
        cost = "$?" if call.cost is None and not call.cache_hit else f"${call.cost or 0:.4f}"
        line = (f"{call.at}  {call.task:<14} {call.model:<20} {hit:>9}  "
                f"{call.tokens_in:>6} in {call.tokens_out:>5} out  {cost:>8}  {call.query}")
        click.echo(line + (f"  ERROR: {call.error}" if call.error else ""))
        if full:
            sent = json.loads(call.request)
            for message in sent.get("messages", []):
                click.echo(f"  [{message['role']}]\n" + _indented(str(message["content"])))
            settings = {k: v for k, v in sent.items() if k not in ("messages", "response_format")}
            click.echo(f"  [parameters] {json.dumps(settings, sort_keys=True)}")
            if "response_format" in sent:
                click.echo(f"  [response_format] {json.dumps(sent['response_format'], sort_keys=True)}")
            click.echo("  [response]\n" + _indented(str(call.response)))


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
