"""`kbuild cache`: the call cache's size and hit rate, and trimming it."""
from __future__ import annotations

import json
import re

import click

from .session import WRONG, KbuildError, Session, pass_session

UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?\s*", text.lower())
    if found is None:
        raise KbuildError(f"--max-size {text!r}: give a size like 500M or 2G", WRONG)
    return int(float(found.group(1)) * UNITS[found.group(2)])


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print kbuild.cache/1 (docs/json.md).")
@pass_session
@click.pass_context
def cache(ctx: click.Context, session: Session, as_json: bool) -> None:
    """The cache of model calls: where it is, its size, and its hit rate over recent builds.

    Example: kbuild cache   (then: kbuild cache gc --max-size 500M)
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..engine.callcache import entries
    from ..store.localstate import LocalState

    spec, engine = session.load()
    found = entries(engine.cache_dir)
    hits = calls = builds = 0
    reports = LocalState(engine.state_dir).reports
    for report in sorted(reports.glob("*.json")) if reports.is_dir() else []:
        try:
            saved = json.loads(report.read_text())
        except (OSError, ValueError):
            continue
        hits, calls, builds = hits + saved.get("cache_hits", 0), calls + saved.get("calls", 0), builds + 1
    where = engine.cache_dir
    if as_json:
        click.echo(json.dumps({"schema": "kbuild.cache/1", "path": str(where), "answers": len(found),
                               "bytes": sum(e.size for e in found), "builds": builds, "cache_hits": hits,
                               "calls": calls}, indent=2))
        return
    click.echo(f"{where}: {len(found)} answers, {_size(sum(e.size for e in found))}")
    if hits + calls:
        click.echo(f"hit rate over the last {builds} builds: {hits / (hits + calls):.0%} "
                   f"({hits} answered by the cache, {calls} calls made)")
    else:
        click.echo("no call was asked in the builds on record")


@cache.command("gc")
@click.option("--max-size", required=True, help="The most the cache may hold, like 500M or 2G.")
@pass_session
def gc(session: Session, max_size: str) -> None:
    """Remove the least recently used answers until the cache holds at most --max-size.

    Example: kbuild cache gc --max-size 500M
    """
    from ..engine.callcache import trim

    limit = parse_size(max_size)
    _, engine = session.load()
    removed = trim(engine.cache_dir, limit)
    click.echo(f"removed {len(removed)} answers ({_size(sum(e.size for e in removed))}), least recently used first; "
               f"the cache holds at most {_size(limit)}")
