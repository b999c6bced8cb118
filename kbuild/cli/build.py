"""`kbuild build` (and `kbuild` alone): bring the store up to date."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from typing import TYPE_CHECKING

from ..records import uptodate
from . import batchmode
from .session import FAILED, LOCKED, WAITING, WRONG, KbuildError, Session, pass_session

if TYPE_CHECKING:
    from ..engine import Engine, Query, Report
    from ..engine.snapshot import StatPass
    from ..store.handedits import Edits


@click.command()
@click.option("-n", "--dry-run", is_flag=True, help="Say what would run and why; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.option("--refresh", is_flag=True, help="Ask the model again instead of using cached answers.")
@click.option("--no-fetch", is_flag=True, help="Do not download url sources again; use the copies in raw/.")
@click.option("--cutoff", type=click.Choice(["meaning", "exact"]), default="meaning", show_default=True,
              help="exact: a rebuilt page stops the climb only when it is byte for byte the same.")
@click.option("--force", is_flag=True,
              help="Overwrite pages edited by hand (their text is kept in .kbuild/overwritten/).")
@click.option("--batch", is_flag=True,
              help="Send the model calls the cache lacks through the server's batch service (OpenAI's Batch "
                   "API: half the price, answered within 24 hours) and build what is answered; exit 4 while "
                   "calls are submitted or running: run it again to collect.")
@click.option("--wait", "wait_for_batches", is_flag=True,
              help="With --batch: wait for each batch, with progress, and go on until the store is built.")
@click.option("--poll", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS",
              help="With --batch --wait: how often to ask how the batches stand.")
@pass_session
def build(session: Session, dry_run: bool = False, as_json: bool = False, refresh: bool = False,
          no_fetch: bool = False, cutoff: str = "meaning", force: bool = False, batch: bool = False,
          wait_for_batches: bool = False, poll: float = 30.0) -> None:
    """Bring the store up to date (the command to run after `git pull`).

    Exit codes: 0 built; 1 something failed to build; 2 the command or the Kbuildfile is wrong;
    3 another kbuild is building this store; 4 (--batch) calls were submitted or are still
    running in a batch: run `kbuild build --batch` again to collect them.

    Example: kbuild build --dry-run   (then: kbuild build)
    """
    if wait_for_batches and not batch:
        raise KbuildError("--wait waits for batches: use it with --batch (kbuild build --batch --wait)", WRONG)
    if not (dry_run or as_json or refresh or no_fetch or cutoff != "meaning" or session.verbose):
        settled = session.settled_queries()
        if settled is not None:  # nothing changed since a build that left every query settled
            if not session.quiet:
                remote = ", 0 from the remote" if os.environ.get("KBUILD_CACHE_URL", "").strip() else ""
                click.echo(f"0 ran, {settled} reused, 0 cut off, 0 failed, 0 calls (0 cached{remote}), 0.00s")
            return
    from ..store.harness import update_harness
    from ..store.reports import report_json

    spec, engine = session.load()
    # before a rule reads them; the Kbuildfile too, which Python runs without keeping it as a module
    code = uptodate.code_stats(spec.root, [spec.path, *(Path(p) for r in spec.rules for p in r.files)])
    engine.cutoff_hooks = cutoff == "meaning"
    fetch_problems = [] if dry_run or no_fetch or spec.before_build is None else spec.before_build()
    for problem in fetch_problems:
        click.secho(f"failed: {problem}", fg="red", err=True)
    app = spec.application
    notice = app.backend.notice if app is not None else None
    if notice and not session.quiet and not as_json and _first_said(engine.state_dir, notice):
        click.echo(f"kbuild: {notice}", err=True)
    listings = {glob: uptodate.listing(spec.root, glob) for glob in app.target_globs()} if app else {}
    targets = session.targets(spec)
    if dry_run:
        print_plan(engine, targets, as_json)
        return
    batches = batchmode.service_for(app, engine.state_dir) if batch else None
    edits = protect_hand_edits(engine, targets, force, "kbuild build", session.quiet)
    if not dry_run:
        uptodate.forget(engine.state_dir)  # before anything changes: a build under way is never "up to date"
    show = not as_json and not session.quiet
    while True:  # once; in batch mode, once per batch until nothing waits (or the batch is submitted)
        collected = None
        if batches is not None:
            service, backend = batches
            collected = batchmode.collect(service, show)
            backend.batch = collected.calls
        # the look for hand edits stat'ed every file: the first build takes what it found
        report = run_build(engine, targets, refresh, show, edits.stat_pass if collected is None else None)
        if batches is None or collected is None:
            break
        if not report.waiting:
            batches[0].forget_results()  # every answer the store needed is in the call cache now
            break
        if not as_json:
            print_report(report, session.debug, session.quiet, session.verbose)
        pending = batchmode.submit(batches[0], collected, show, will_wait=wait_for_batches)
        if not pending:  # waits with nothing submitted or running: asking again would change nothing
            raise KbuildError(f"{len(report.waiting)} queries wait for calls no batch holds; run "
                              "`kbuild build --batch` again", FAILED)
        if not wait_for_batches:
            if as_json:
                click.echo(json.dumps(report_json(report), indent=2, sort_keys=True))
            raise click.exceptions.Exit(WAITING)
        batchmode.wait(batches[0], pending, poll, show)
    if report.ok and spec.application is not None:
        for harness in spec.harness_files:
            update_harness(spec.root / harness, spec.root, spec.application.store.index())
    if report.ok and not fetch_problems and not refresh and cutoff == "meaning" and app is not None and code is not None \
            and not app.fetches():
        remember_settled(engine, spec.root, code, listings, report)
    if as_json:
        click.echo(json.dumps(report_json(report), indent=2, sort_keys=True))
    else:
        print_report(report, session.debug, session.quiet, session.verbose)
    if not report.ok or fetch_problems:
        raise click.exceptions.Exit(FAILED)


def run_build(engine: Engine, targets: list[Query], refresh: bool, show: bool,
              stat_pass: StatPass | None = None) -> Report:
    """One build with its progress shown, its report saved; the engine's errors as one line each.
    `stat_pass`: what the look for hand edits just before found unchanged (Engine.build)."""
    from ..engine import BuildLocked, BuildStopped, LockError
    from ..store.localstate import LocalState
    from ..services.progress import Progress
    from ..store.reports import save_report

    # The bar's total is what the recorded graph says may run: a dry run, worth its cost on a
    # terminal only (a log gets counts); a first build has no graph, and its bar counts without one.
    recorded = engine.lock_path.exists() or engine.local.state_db.exists()
    counted = show and recorded and sys.stderr.isatty()
    progress = Progress(enabled=show, total=len(engine.plan(targets)) if counted else None)
    try:
        report = engine.build(targets, refresh=refresh, observer=progress, stat_pass=stat_pass)
    except BuildLocked as exc:
        raise KbuildError(str(exc), LOCKED) from None
    except LockError as exc:
        raise KbuildError(str(exc), WRONG) from None
    except BuildStopped as exc:
        raise KbuildError(str(exc), FAILED) from None
    finally:
        progress.close()
    try:
        save_report(LocalState(engine.state_dir), report)
    except OSError as exc:  # the build is done; only `explain` loses its history
        click.secho(f"warning: could not save the build report: {exc.strerror or exc}", fg="yellow", err=True)
    return report


def protect_hand_edits(engine: Engine, targets: list[Query], force: bool, command: str, quiet: bool = False) -> Edits:
    """Refuse (exit 1) to build over pages edited by hand, one line each, unless `force`; the
    text of every edited page a build will overwrite is kept in .kbuild/overwritten/ first.
    The edits found, with what the look found unchanged, for the build that follows."""
    from ..store import handedits
    from ..engine import BuildLocked, LockError

    try:
        edits = handedits.find(engine, targets)
    except BuildLocked as exc:
        raise KbuildError(str(exc), LOCKED) from None
    except LockError as exc:
        raise KbuildError(str(exc), WRONG) from None
    if edits.by_hand and not force:
        for path in edits.by_hand:
            click.secho(f"edited by hand: {path}", fg="red", err=True)
        raise KbuildError(handedits.refusal(edits.by_hand, command), FAILED)
    try:
        kept = handedits.keep(engine, [*edits.by_hand, *edits.conflicted, *edits.unrecorded])
    except OSError as exc:
        raise KbuildError(f"cannot keep a copy of {exc.filename or 'an edited page'} before overwriting it: "
                          f"{exc.strerror or exc}; nothing was built", FAILED) from None
    for path, copy in kept.items():
        why = ("had merge conflict markers" if path in edits.conflicted else "was edited by hand"
               if path in edits.by_hand else "differs from its record after an interrupted build")
        if not quiet or path in edits.by_hand:
            click.secho(f"overwriting {path}, which {why}; its text is kept in "
                        f"{os.path.relpath(copy, engine.root)}", fg="yellow", err=True)
    return edits


def remember_settled(engine: Engine, root: Path, code: dict[str, list[int]], listings: dict[str, list[str]],
                     report: Report) -> None:
    """Record what the next `kbuild` compares to say "nothing to do" before running the Kbuildfile,
    when this build left every query settled with a stat known for every file."""
    from ..engine import LockError
    from ..engine.lockfiles import SUFFIX

    try:
        lock = {f.relative_to(root).as_posix(): uptodate.stat_of(f) for f in engine.lock.present()}
    except LockError:
        return
    if not lock or any(s is None or time.time_ns() - s[1] < uptodate.RACY_NS for s in lock.values()):
        return  # a lock written just now may change again within its mtime's tick: the next build records
    settled = engine.settled_stats()  # after the look at the lock: an edit rewrites it, and ends here
    if settled is None:
        return
    files = {**settled, **lock}
    shards = f"{engine.lock.folder.relative_to(root).as_posix()}/*{SUFFIX}"  # a pull that brought a shard
    listings = {**listings, shards: uptodate.listing(root, shards)}
    try:
        uptodate.record(engine.state_dir, uptodate.new_record(code, files, listings, report.reused + len(report.executed)))
    except OSError:
        pass  # the next build decides the slow way


def print_plan(engine: Engine, targets: list[Query], as_json: bool) -> None:
    plan = engine.plan(targets)
    if as_json:
        click.echo(json.dumps({qid: reason.sentence for qid, reason in plan.items()}, indent=2, sort_keys=True))
        return
    if not plan:
        click.echo("up to date: nothing would run")
        return
    for qid in sorted(plan):
        click.echo(f"{qid}: {plan[qid].sentence}")
    click.echo(f"{len(plan)} queries would be checked or run (fewer run where a rebuilt value is unchanged)")
    from ..services.status import dry_run_estimate  # the call log's module: only a dry run needs it

    click.echo(dry_run_estimate(engine))


def print_failures(report: Report, debug: bool = False) -> None:
    """The failures at the root of the build's, each once; what failed only because of them is counted."""
    causes = report.root_failures()
    for qid, message in sorted(causes.items(), key=lambda item: item[1]):
        from ..engine import Problem

        # a Problem names its source itself; the query id would only repeat it
        where = "" if isinstance(report.errors.get(qid), Problem) else f"{qid}: "
        click.secho(f"failed: {where}{message}", fg="red", err=True)
        exc = report.errors.get(qid)
        if debug and exc is not None:
            click.echo(getattr(exc, "__kbuild_traceback__", ""), err=True)


def print_report(report: Report, debug: bool, quiet: bool = False, verbose: bool = False) -> None:
    if verbose:
        for qid in report.executed:
            cut = f" (cut off: {report.cutoff[qid]})" if qid in report.cutoff else ""
            click.echo(f"ran {qid}: {report.reasons.get(qid, '')}{cut}")
    for qid, messages in sorted(report.warnings.items()) if not quiet else ():
        for message in messages:
            click.secho(f"warning: {message}", fg="yellow", err=True)
    print_failures(report, debug)
    causes = report.root_failures()
    if len(report.failed) > len(causes):
        click.secho(f"({len(report.failed) - len(causes)} more could not be built because of these)", fg="red", err=True)
    if not quiet:
        click.echo(report.summary())


def _first_said(state_dir: Path, notice: str) -> bool:
    """True the first time this store hears `notice` (it is kept in .kbuild/notice): a setting
    said once, not at every build; said again when it changes, or after `kbuild clean`."""
    from ..engine import atomic_write

    said = state_dir / "notice"
    try:
        if said.read_text() == notice:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        atomic_write(said, notice.encode())
    except OSError:
        pass  # a store we cannot write to hears it every time
    return True
