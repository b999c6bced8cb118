"""A build's progress on a terminal."""
from __future__ import annotations

import sys


class Progress:
    """A progress bar (tqdm): queries done of those that may run, failures, the query at work,
    elapsed and estimated time. Silent when not enabled (stderr is not a terminal, --json, -q).
    Called by the engine as an observer."""

    def __init__(self, enabled: bool, total: int | None = None) -> None:
        self.bar = None
        self.failed = 0
        if enabled:
            from tqdm import tqdm  # only on a terminal: tqdm costs startup time

            self.bar = tqdm(total=total or None, unit="query", leave=False, dynamic_ncols=True, file=sys.stderr)

    def __call__(self, event: str, qid: str) -> None:
        if self.bar is None:
            return
        if event in ("done", "fail"):
            self.failed += event == "fail"
            if self.bar.total is not None and self.bar.n >= self.bar.total:
                self.bar.total += 1  # the estimate was low: a new query (a new fact) appeared
            self.bar.update(1)
            self.bar.set_postfix_str(f"{self.failed} failed, {qid[:50]}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
