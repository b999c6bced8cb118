"""`kbuild build --batch`: what the command says and does around each build in batch mode.

Before a build, the store's batches are collected (kbuild.model.batches); the build answers its
calls from them and defers the rest (their pages wait); after it, the deferred calls are
submitted as one new batch. Exit code WAITING says "submitted, not done: run it again".
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .session import FAILED, WRONG, KbuildError

if TYPE_CHECKING:
    from ..application import Application
    from ..model.batches import BatchRecord, BatchService, Collected, Progress
    from ..model.openai_backend import OpenAIBackend


def service_for(app: Application | None, state_dir: Path) -> tuple[BatchService, OpenAIBackend]:
    """The batch service of the Kbuildfile's model; one line and exit 2 when it has none."""
    from ..store.localstate import LocalState
    from ..model.batches import BatchService
    from ..model.openai_backend import OpenAIBackend

    backend = app.backend if app is not None else None
    if not isinstance(backend, OpenAIBackend):  # batches are the OpenAI Batch API's
        raise KbuildError("--batch needs a model server: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (a server "
                          "with the batch endpoints, such as vLLM) and KBUILD_MODEL; the offline backend makes no "
                          "calls to batch", WRONG)
    assert app is not None
    if backend.settings.missing_key:
        raise KbuildError(f"--batch: {backend.settings.missing_key}", WRONG)
    folder = LocalState(state_dir).batches
    return BatchService(backend.settings, folder, BatchService.store_name(app.root)), backend


def failing(service: BatchService, exc: Exception) -> KbuildError:
    """An error of the batch service, as one line: where, what, and what to do."""
    import openai

    reason = exc.message if isinstance(exc, openai.APIStatusError) else str(exc.__cause__ or exc)
    return KbuildError(f"the batch service at {service.where} failed: {reason}; nothing was lost (the batches are "
                       "recorded in .kbuild/batches/), run `kbuild build --batch` again", FAILED)


def collect(service: BatchService, show: bool) -> Collected:
    import openai

    try:
        collected = service.collect()
    except openai.OpenAIError as exc:
        raise failing(service, exc) from None
    for note in collected.notes if show else ():
        click.echo(f"kbuild: {note}", err=True)
    for problem in collected.problems:
        click.secho(f"warning: {problem}", fg="yellow", err=True)
    return collected


def submit(service: BatchService, collected: Collected, show: bool, will_wait: bool = False) -> list[BatchRecord]:
    """Submit what this build deferred; the batches to wait for (running and new)."""
    import openai

    calls = collected.calls
    waiting = list(collected.running)
    if calls.to_submit:
        try:
            record = service.submit(calls.to_submit)
        except openai.OpenAIError as exc:
            raise failing(service, exc) from None
        waiting.append(record)
        if show and will_wait:
            click.echo(f"submitted {len(calls.to_submit)} calls as batch {record.id}; waiting for it")
        elif show:
            click.echo(f"submitted {len(calls.to_submit)} calls as batch {record.id}, run `kbuild build --batch` "
                       "again to collect (or add --wait)")
    if calls.still_running and show and not will_wait:
        ids = ", ".join(r.id for r in collected.running)
        click.echo(f"{len(calls.still_running)} calls are in batches still running ({ids}), run `kbuild build "
                   "--batch` again to collect")
    return waiting


def wait(service: BatchService, records: list[BatchRecord], every: float, show: bool) -> None:
    """Poll until the batches finish: a bar on a terminal, a line per poll in a log."""
    import openai

    bar = None
    if show and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=None, unit="call", desc="batch", leave=False, dynamic_ncols=True, file=sys.stderr)

    def progress(now: Progress) -> None:
        if bar is not None:
            bar.total = now.total
            bar.n = now.done
            bar.set_postfix_str(", ".join(sorted(set(now.statuses))))
        elif show:
            click.echo(f"kbuild: waiting for {now.batches} batch{'es' if now.batches != 1 else ''}: "
                       f"{now.done} of {now.total} calls done ({', '.join(sorted(set(now.statuses)))})", err=True)

    try:
        service.wait(records, every, progress)
    except openai.OpenAIError as exc:
        raise failing(service, exc) from None
    finally:
        if bar is not None:
            bar.close()
