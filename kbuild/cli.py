"""The kbuild command line.

Exit codes: 0 done; 1 the build or a check failed (CI should stop); 2 the command or the
Kbuildfile is wrong; 3 another kbuild holds the store.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from . import buildfile
from .engine import BuildLocked, Engine, LockError, Query, Report, to_graph


class Session:
    def __init__(self, directory: Path, file: Path | None, debug: bool) -> None:
        self.directory = directory
        self.file = file
        self.debug = debug

    def load(self) -> tuple[buildfile.Buildfile, Engine]:
        try:
            path = self.file or buildfile.find(self.directory.resolve())
            spec = buildfile.load(path)
        except buildfile.BuildfileError as exc:
            if self.debug and exc.__cause__:
                raise
            fail(str(exc), code=2)
        return spec, Engine(spec.root, spec.rules, max_calls=spec.max_calls)

    def targets(self, spec: buildfile.Buildfile) -> list[Query]:
        try:
            targets = list(spec.targets())
        except Exception as exc:
            if self.debug:
                raise
            fail(f"targets() in {spec.path} failed: {type(exc).__name__}: {exc}", code=2)
        bad = [t for t in targets if not isinstance(t, Query)]
        if bad:
            fail(f"targets() in {spec.path} must return queries (rule(key)), got {bad[0]!r}", code=2)
        return targets


def fail(message: str, code: int = 1) -> NoReturn:
    click.secho(f"kbuild: {message}", fg="red", err=True)
    sys.exit(code)


@click.group(invoke_without_command=True)
@click.option("-C", "--directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="Run as if started in this folder.")
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, path_type=Path),
              help="The Kbuildfile.py to use (default: found in this folder or above).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.pass_context
def main(ctx: click.Context, directory: Path, file: Path | None, debug: bool) -> None:
    """Build a knowledge base. With no command: bring the whole store up to date."""
    ctx.obj = Session(directory, file, debug)
    if ctx.invoked_subcommand is None:
        ctx.invoke(build)


@main.command()
@click.option("-n", "--dry-run", is_flag=True, help="Say what would run and why; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.option("--refresh", is_flag=True, help="Ask the model again instead of using cached answers.")
@click.pass_obj
def build(session: Session, dry_run: bool = False, as_json: bool = False, refresh: bool = False) -> None:
    """Bring the store up to date (the command to run after `git pull`)."""
    spec, engine = session.load()
    targets = session.targets(spec)
    if dry_run:
        print_plan(engine, targets, as_json)
        return
    progress = Progress(enabled=sys.stderr.isatty() and not as_json)
    try:
        report = engine.build(targets, refresh=refresh, observer=progress)
    except BuildLocked as exc:
        fail(str(exc), code=3)
    except LockError as exc:
        fail(str(exc), code=2)
    finally:
        progress.close()
    if as_json:
        click.echo(json.dumps(report_json(report), indent=2, sort_keys=True))
    else:
        print_report(report, session.debug)
    if not report.ok:
        sys.exit(1)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def status(session: Session, as_json: bool) -> None:
    """What a build would run and why (the same as `kbuild build --dry-run`)."""
    spec, engine = session.load()
    print_plan(engine, session.targets(spec), as_json)


@main.command()
@click.argument("what")
@click.pass_obj
def explain(session: Session, what: str) -> None:
    """Why a query or a generated file would rebuild, what it read and what reads it.

    WHAT is a query id as `kbuild graph` prints it, or the path of a file a query wrote.
    """
    spec, engine = session.load()
    targets = session.targets(spec)
    memos = engine.memos()
    qid = what if what in memos else next((q for q, m in memos.items() if what in m.outputs), None)
    if qid is None:
        fail(f"{what} is neither a recorded query nor a file one wrote; `kbuild graph` lists them", code=2)
    plan = engine.plan(targets)
    memo = memos[qid]
    click.echo(f"{qid}  (rule {memo.rule})")
    click.echo(f"  {'would run: ' + plan[qid] if qid in plan else 'up to date'}")
    for path in sorted(memo.outputs):
        click.echo(f"  writes {path}")
    for group in memo.deps:
        for dep, _ in group:
            mark = "*" if plan.get(dep) else " "
            click.echo(f"  {mark} reads {dep}")
    graph = to_graph(memos, files=False)
    readers = sorted(graph.predecessors(qid)) if qid in graph else []
    for reader in readers:
        click.echo(f"    read by {reader}")


@main.command()
@click.option("--format", "fmt", type=click.Choice(["dot", "mermaid", "json"]), default="dot", show_default=True)
@click.option("--no-files", is_flag=True, help="Leave input files out; show queries only.")
@click.pass_obj
def graph(session: Session, fmt: str, no_files: bool) -> None:
    """Print the recorded dependency graph (edges point from a query to what it read)."""
    _, engine = session.load()
    g = to_graph(engine.memos(), files=not no_files)
    nodes = sorted(g.nodes)
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    edges = sorted(g.edges)
    if fmt == "json":
        click.echo(json.dumps({"nodes": [{"id": n, **g.nodes[n]} for n in nodes],
                               "edges": [list(e) for e in edges]}, indent=1, sort_keys=True))
    elif fmt == "mermaid":
        click.echo("graph LR")
        for n in nodes:
            label = n.replace('"', "#quot;")
            click.echo(f'  {ids[n]}["{label}"]')
        for a, b in edges:
            click.echo(f"  {ids[a]} --> {ids[b]}")
    else:
        click.echo("digraph kbuild {\n  rankdir=LR;")
        for n in nodes:
            shape = "note" if g.nodes[n].get("kind") == "file" else "box"
            click.echo(f"  {json.dumps(n)} [shape={shape}];")
        for a, b in edges:
            click.echo(f"  {json.dumps(a)} -> {json.dumps(b)};")
        click.echo("}")


class Progress:
    """One line on a terminal, redrawn at most ten times a second: long work shows it is moving."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.ran = self.failed = 0
        self.last = 0.0

    def __call__(self, event: str, qid: str) -> None:
        if event == "done":
            self.ran += 1
        elif event == "fail":
            self.failed += 1
        now = time.monotonic()
        if self.enabled and (now - self.last > 0.1 or event == "fail"):
            self.last = now
            line = f"[{self.ran} ran, {self.failed} failed] {qid}"
            click.echo("\r" + line[:100].ljust(100), nl=False, err=True)

    def close(self) -> None:
        if self.enabled and self.last:
            click.echo("\r" + " " * 100 + "\r", nl=False, err=True)


def print_plan(engine: Engine, targets: list[Query], as_json: bool) -> None:
    plan = engine.plan(targets)
    if as_json:
        click.echo(json.dumps(plan, indent=2, sort_keys=True))
        return
    if not plan:
        click.echo("up to date: nothing would run")
        return
    for qid in sorted(plan):
        click.echo(f"{qid}: {plan[qid]}")
    click.echo(f"{len(plan)} queries would be checked or run (fewer run where a rebuilt value is unchanged)")


def report_json(report: Report) -> dict[str, Any]:
    return {
        "executed": report.executed,
        "reused": report.reused,
        "cutoff": report.cutoff,
        "failed": report.failed,
        "reasons": report.reasons,
        "removed": report.removed,
        "calls": report.calls,
        "cache_hits": report.cache_hits,
        "seconds": round(report.seconds, 3),
    }


def print_report(report: Report, debug: bool) -> None:
    for qid, message in sorted(report.failed.items()):
        click.secho(f"failed: {qid}: {message}", fg="red", err=True)
        exc = report.errors.get(qid)
        if debug and exc is not None:
            click.echo(getattr(exc, "__kbuild_traceback__", ""), err=True)
    click.echo(report.summary())
