"""`kbuild watch`: rebuild while the user edits, one build per burst of edits.

Everything under the root is watched (watchfiles, debounced, so an editor's save-rename-write is
one change): sources, Kbuildfile.py, rules, prompts, and inside the output folder the files the
Kbuildfile says a person edits (the default pipeline's sources.yml). Generated files are not
inputs: a change to one that the last build did not write is reported as a hand edit. A change
made during a build is picked up by the next one (watchfiles keeps what happened while we were building). A failed build, or a
Kbuildfile that no longer loads, is reported and the watcher keeps going. Ctrl-C stops it between
builds or inside one; every write is atomic and the store's lock is released either way.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click
import watchfiles

from ..engine.files import TEMP_SUFFIX
from ..engine.hashing import hash_bytes
from ..engine.layout import FOLDER, LOCK_FILE

IGNORED_DIRS = {FOLDER, ".git", "__pycache__", ".hypothesis", ".pytest_cache", "node_modules", ".venv"}


def _is_code(path: Path) -> bool:
    """The Kbuildfile and the rules it may import: what decides the rules, read by no query."""
    return path.suffix == ".py" or path.name.endswith(".md") and "prompts" in path.parts


def _stamp() -> str:
    return time.strftime("%H:%M:%S")


def watch(root: Path, output_folder: Path | None, build_once: Callable[[], str | None],
          outputs: Callable[[], dict[str, str]], inputs_in_output_folder: Callable[[], set[str]],
          reads: Callable[[], set[str] | None], wait_for_other_build: Callable[[], bool],
          debounce_ms: int = 300, verbose: bool = False, settle_ms: int = 50, force: bool = False) -> None:
    """Build, then rebuild after each burst of changes, until interrupted.

    `build_once` loads the Kbuildfile and builds, returning a one-line summary (None when the
    Kbuildfile could not be loaded); `outputs` maps each generated file to the hash the lock
    records for it. Inside `output_folder` every file is generated but those
    `inputs_in_output_folder` names (as the Kbuildfile said at the last build; paths relative to
    `root`). A burst ends after `settle_ms` of quiet, or at `debounce_ms` at the latest.
    A hand edit is reported; `build_once` refuses to overwrite it unless `force`.
    """
    generated_folder = output_folder.resolve() if output_folder is not None else None
    edited: set[str] = set()  # every input the Kbuildfile named so far: a deleted one is still an edit

    def relevant(change: watchfiles.Change, path: str) -> bool:
        p = Path(path)
        if IGNORED_DIRS & set(p.parts) or p.name.endswith(TEMP_SUFFIX) or p.name == LOCK_FILE:
            return False
        return True

    click.echo(f"[{_stamp()}] {build_once() or 'the Kbuildfile did not load; fix it and save'}")
    announced = False
    try:
        # yield_on_timeout: the first empty batch says the watcher is in place, and only then is
        # "watching" printed (an edit before it would be lost)
        for changes in watchfiles.watch(root, watch_filter=relevant, debounce=debounce_ms, step=settle_ms,
                                        rust_timeout=200, yield_on_timeout=True, raise_interrupt=True):
            if not announced:
                click.echo(f"[{_stamp()}] watching {root} (Ctrl-C stops)")
                announced = True
            if not changes:
                continue
            if wait_for_other_build():  # its writes are its own, not hand edits: judged after it ends
                click.echo(f"[{_stamp()}] waited for another kbuild to finish building this store")
            generated = outputs()
            edited.update(inputs_in_output_folder())
            read = reads()  # None before the first build: then every change counts
            inputs, hand_edits = [], []
            for _, path in sorted(changes, key=lambda c: c[1]):
                full = Path(path)
                rel = full.relative_to(root).as_posix() if full.is_relative_to(root) else path
                in_output_folder = generated_folder is not None and full.is_relative_to(generated_folder)
                if rel in generated or (in_output_folder and rel not in edited):
                    # written by kbuild (pages, raw copies, fetched urls); only a change the last
                    # build did not make is worth a word
                    recorded = generated.get(rel)
                    current = hash_bytes(full.read_bytes()) if full.is_file() else None
                    if recorded is not None and current != recorded:
                        hand_edits.append(rel)  # not written by the last build: a person did it
                    continue
                if read is not None and rel not in read and rel not in edited and not _is_code(full):
                    continue  # not an input of the build (a log, an editor's file): no rebuild for it
                inputs.append(rel)
            for rel in hand_edits:
                click.echo(f"[{_stamp()}] {rel} was edited by hand; " + (
                    "the next build writes it again, keeping its text in .kbuild/overwritten/" if force else
                    "builds leave it alone until it is restored or removed (edit its source instead)"))
            if not inputs and not hand_edits:
                continue
            started = time.perf_counter()
            shown = ", ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
            if verbose:  # the moment the rebuild starts, for benchmarks/watch.py
                click.echo(f"[{_stamp()}] rebuilding after {shown or 'generated pages'} at {time.time():.3f}")
            summary = build_once()
            took = time.perf_counter() - started
            click.echo(f"[{_stamp()}] changed: {shown or 'generated pages'} -> "
                       f"{summary or 'the Kbuildfile did not load; fix it and save'} ({took:.2f}s)")
    except KeyboardInterrupt:
        click.echo(f"[{_stamp()}] stopped")
