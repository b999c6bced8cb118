"""A build's progress: a bar on a terminal, a line now and then in a log (CI)."""
from __future__ import annotations

import sys
import time
from typing import TextIO

LINE_EVERY = 10.0  # seconds between two progress lines in a log


class Progress:
    """Queries done of those that may run, failures, the query at work, elapsed and estimated
    time. On a terminal a bar (tqdm); elsewhere a plain line every LINE_EVERY seconds, so a CI log
    shows a long build moving. `total` is what the recorded graph says may run, or None on a
    first build, which cannot know it: then the bar counts without a percentage rather than
    read 100% all along. Silent when not enabled (--json, -q). Called by the engine as an observer."""

    def __init__(self, enabled: bool, total: int | None = None, stream: TextIO | None = None) -> None:
        self.bar = None
        self.failed = 0
        self.done = 0
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.started = self.last_line = time.monotonic()
        if enabled and self.stream.isatty():
            from tqdm import tqdm  # only on a terminal: tqdm costs startup time

            self.bar = tqdm(total=total, unit="query", leave=False, dynamic_ncols=True, file=self.stream)

    def __call__(self, event: str, qid: str) -> None:
        if not self.enabled or event not in ("done", "fail"):
            return
        self.done += 1
        self.failed += event == "fail"
        if self.total is not None and self.done > self.total:  # more ran than the graph said: no percentage
            self.total = None
            if self.bar is not None:
                self.bar.total = None
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(f"{self.failed} failed, {qid[:50]}", refresh=False)
            return
        now = time.monotonic()
        if now - self.last_line >= LINE_EVERY:
            self.last_line = now
            of = f" of {self.total}" if self.total is not None else ""
            elapsed = now - self.started
            # at the pace so far: a guess the log says is one, better than none on an hour's build
            left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left" if self.total else ""
            print(f"kbuild: {self.done}{of} queries, {self.failed} failed, {elapsed:.0f} s{left}; now {qid[:60]}",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
