"""`kbuild watch` in a real subprocess, against real file edits."""
from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import kbuild

from kbuild.engine.buildlock import BuildLock

pytestmark = pytest.mark.slow  # a watching process, its debounce and settle windows


class Watcher:
    def __init__(self, root: Path) -> None:
        # A burst's edits come 20 ms apart; a loaded machine can stretch that far past the default
        # 50 ms quiet window, so the test gives the burst a whole second of quiet to end in
        self.process = subprocess.Popen([sys.executable, "-m", "kbuild", "-C", str(root), "watch",
                                         "--debounce", "5000", "--settle", "1000"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, words: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if words in line:
                return line
        raise AssertionError(f"no line with {words!r} in {timeout}s; saw {self.seen}")

    def quiet(self, seconds: float) -> list[str]:
        time.sleep(seconds)
        got = []
        while not self.lines.empty():
            got.append(self.lines.get())
        self.seen += got
        return got


def test_watch_rebuilds_bursts_once_survives_a_broken_kbuildfile_and_stops_cleanly(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "notes.md").write_text("# Notes\n\nThe shop opens at nine.\n")
    assert kbuild(tmp_path, "add", "shop", "notes.md").exit_code == 0
    watcher = Watcher(tmp_path)
    try:
        watcher.wait_for("watching")
        (tmp_path / "notes.md").write_text("# Notes\n\nThe shop opens at ten.\n")
        line = watcher.wait_for("changed: notes.md")
        assert " ran, " in line and "0 failed" in line
        assert "opens at ten" in (tmp_path / "kb/shop/facts/notes/text.md").read_text()

        for n in range(5):  # a burst, as an editor or a script saves: one build
            (tmp_path / "notes.md").write_text(f"# Notes\n\nThe shop opens at {n}.\n")
            time.sleep(0.02)
        watcher.wait_for("changed: notes.md")
        assert not [line for line in watcher.quiet(3) if "changed:" in line]
        assert "opens at 4" in (tmp_path / "kb/shop/facts/notes/text.md").read_text()

        for n in range(3):  # a file no build reads (the watcher's own log, redirected): no build
            (tmp_path / "watch.log").write_text(f"line {n}\n")
            time.sleep(0.02)
        assert not [line for line in watcher.quiet(3) if "changed:" in line]

        kbuildfile = tmp_path / "Kbuildfile.py"
        good = kbuildfile.read_text()
        kbuildfile.write_text(good + "\nthis is not python\n")
        watcher.wait_for("did not load")
        kbuildfile.write_text(good)
        watcher.wait_for("changed: Kbuildfile.py")

        edited = tmp_path / "kb/shop/facts/notes/text.md"
        edited.write_text("a hand edit\n")
        watcher.wait_for("was edited by hand")
        watcher.wait_for("not built: refused: 1 page edited by hand")  # as git keeps local changes
        assert edited.read_text() == "a hand edit\n"
        edited.unlink()  # given up: the next build writes it again

        # sources.yml lies in the store among generated pages, but a person edits it: an input
        (tmp_path / "more.md").write_text("# More\n\nThe shop closes at six.\n")
        listing = tmp_path / "kb/shop/sources.yml"
        listing.write_text(listing.read_text().rstrip("\n") + "\n  - id: more\n    path: more.md\n")
        watcher.wait_for("changed: kb/shop/sources.yml")
        assert "closes at six" in (tmp_path / "kb/shop/facts/more/text.md").read_text()
    finally:
        watcher.process.send_signal(signal.SIGINT)
        code = watcher.process.wait(timeout=30)
    assert code == 0, watcher.seen
    with BuildLock(tmp_path / ".kbuild"):  # released
        pass


def test_the_watcher_waits_for_another_build_to_finish(tmp_path):
    from kbuild.engine.buildlock import wait_until_free

    state = tmp_path / ".kbuild"
    assert wait_until_free(state) is False  # no build ever ran here
    released = threading.Event()
    holding = threading.Event()

    def other_build() -> None:
        with BuildLock(state):
            holding.set()
            released.wait(30)

    thread = threading.Thread(target=other_build)
    thread.start()
    holding.wait(30)
    waiter = threading.Thread(target=lambda: results.append(wait_until_free(state)))
    results: list[bool] = []
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()  # still waiting while the other build holds the store
    released.set()
    waiter.join(30)
    thread.join(30)
    assert results == [True] and wait_until_free(state) is False
