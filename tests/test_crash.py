"""A build killed with SIGKILL at any point leaves a store the next build completes correctly."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import kbuild

pytestmark = pytest.mark.slow  # builds killed (SIGKILL) and disks filled at random points

KBUILDFILE = '''
import time
from kbuild.engine import rule

N = 60

@rule
async def chunk(ctx, i):
    text = ctx.read_text(f"src/{i}.txt")
    time.sleep(0.004)  # spread the work, so kill points land inside it

    async def model():
        return {"text": text.upper()}

    answer = await ctx.call({"prompt": text}, model)
    ctx.write(f"out/{i}.md", answer["text"])
    return answer["text"]

@rule
async def index(ctx):
    pages = await ctx.query_all([chunk(i) for i in range(N)])
    ctx.write("out/index.md", "\\n".join(p.split()[0] for p in pages))
    return len(pages)

def targets():
    return [index()]
'''


def start_kbuild(folder: Path, *args: str) -> subprocess.Popen[bytes]:
    """kbuild in a process of its own, to be killed part way."""
    return subprocess.Popen([sys.executable, "-m", "kbuild", "-C", str(folder), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def make_store(folder: Path, version: int) -> None:
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "Kbuildfile.py").write_text(KBUILDFILE)
    for i in range(60):
        (folder / "src" / f"{i}.txt").write_text(f"source {i} version {version if i % 3 == 0 else 0}\n")


def tree(folder: Path, temporaries: bool = False) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted((folder / "out").rglob("*"))
            if p.is_file() and (temporaries or not p.name.endswith(".kbuild-tmp"))}


def test_sigkill_at_random_points_then_build_equals_a_clean_build(tmp_path):
    runs = int(os.environ.get("KBUILD_CRASH_RUNS", "50"))
    rng = random.Random(int(os.environ.get("KBUILD_CRASH_SEED", "7")))
    store = tmp_path / "store"
    make_store(store, 0)
    for run in range(runs):
        make_store(store, run % 4)  # every kill interrupts real work: a third of sources change
        proc = start_kbuild(store)
        time.sleep(rng.uniform(0.15, 0.9))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        valid = {f"SOURCE {i} VERSION {v}" for i in range(60) for v in range(4)}
        for name, data in tree(store).items():  # every page is a whole old or new version
            if name != "out/index.md":
                assert data.decode().strip() in valid, (run, name, data)
    make_store(store, 1)
    done = start_kbuild(store)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err.decode()
    clean = tmp_path / "clean"
    make_store(clean, 1)
    fresh = start_kbuild(clean)
    fresh.communicate(timeout=120)
    assert tree(store, temporaries=True) == tree(clean)  # what a crash left half-written is swept
    assert (store / "kbuild.lock").read_bytes() == (clean / "kbuild.lock").read_bytes()
    again = start_kbuild(store)
    out, _ = again.communicate(timeout=120)
    assert out.decode().startswith("0 ran, 61 reused")  # a new process after a full build runs nothing
    shutil.rmtree(store / ".kbuild")
    assert start_kbuild(store, "status").communicate(timeout=60)[0].decode().startswith("up to date")


DISK_FULL = "No space left on device"


def _full_disk_at(site: str, monkeypatch, after: int) -> None:
    """From the `after`-th write at `site` on, that write fails as on a full disk (and stays
    failing, as a full disk does, until the test frees it)."""
    import errno
    import sqlite3

    from kbuild.engine import build as engine_build
    from kbuild.engine import outputs
    from kbuild.engine import callcache
    from kbuild.engine.state import State

    def os_error(*args, **kwargs):
        raise OSError(errno.ENOSPC, DISK_FULL)

    def sqlite_error(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    module, name, fault, applies = {
        "page": (outputs, "atomic_write", os_error, lambda path, *_: "/out/" in str(path)),
        "lock": (engine_build, "atomic_write", os_error, lambda path, *_: str(path).endswith("kbuild.lock")),
        "cache": (callcache, "atomic_write", os_error, lambda *_: True),
        "memo": (State, "save_memo", sqlite_error, lambda *_: True),
        "commit": (State, "commit", sqlite_error, lambda *_: True),
        "stats": (State, "save_stats", sqlite_error, lambda *_: True),
    }[site]
    real = getattr(module, name)
    seen = []

    def failing(*args, **kwargs):
        checked = args[1:] if module is State else args
        if applies(*checked):
            seen.append(1)
            if len(seen) >= after:
                fault()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)


def stopped_with_one_line_then_ends_clean(stopped, store: Path, clean: Path) -> None:
    """A build stopped by a full disk said so in one line, no traceback; the next build, once
    there is space, ends as a clean build of the same sources does, lock and all."""
    assert stopped.exit_code == 1 and "Traceback" not in stopped.output, stopped.output
    lines = stopped.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbuild: no space left on the device ("), lines
    assert "free some space and run `kbuild` again" in lines[0]
    done = kbuild(store)
    assert done.exit_code == 0, done.output
    make_store(clean, 1)
    assert kbuild(clean).exit_code == 0
    assert tree(store, temporaries=True) == tree(clean)
    assert (store / "kbuild.lock").read_bytes() == (clean / "kbuild.lock").read_bytes()


@pytest.mark.parametrize("site", ["page", "lock", "cache", "memo", "commit", "stats"])
def test_a_full_disk_at_any_write_stops_with_one_line_and_the_next_build_ends_clean(site, tmp_path, monkeypatch):
    store, clean = tmp_path / "store", tmp_path / "clean"
    make_store(store, 0)
    assert kbuild(store).exit_code == 0
    make_store(store, 1)  # a third of the sources change: the build has real work to stop in
    an_hour_ago = time.time() - 3600
    for source in (store / "src").iterdir():  # old enough for their stats to be cached (not "racy")
        os.utime(source, (an_hour_ago, an_hour_ago))
    with monkeypatch.context() as patch:
        _full_disk_at(site, patch, after=1 if site in ("lock", "commit", "stats") else 5)
        stopped = kbuild(store)
    stopped_with_one_line_then_ends_clean(stopped, store, clean)
    assert kbuild(store, "check").exit_code == 0
    assert kbuild(store).output.startswith("0 ran, 61 reused")


BIG_PAGES = KBUILDFILE.replace('ctx.write(f"out/{i}.md", answer["text"])',
                               'ctx.write(f"out/{i}.md", answer["text"] * (20000 if "VERSION 1" in answer["text"] else 1))')


def test_a_really_full_disk_stops_the_build_and_after_space_is_freed_it_ends_clean(tmp_path):
    """The same on a small tmpfs, where the writes that fail are real: SQLite's too."""
    import subprocess as sp

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    store, clean = tmp_path / "store", tmp_path / "clean"
    store.mkdir()
    if sp.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(store)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        make_store(store, 0)
        (store / "Kbuildfile.py").write_text(BIG_PAGES)
        assert start_kbuild(store).wait(timeout=120) == 0
        make_store(store, 1)  # 20 pages of 380 KB each now: more than the 2 MB the store has
        (store / "Kbuildfile.py").write_text(BIG_PAGES)
        full = start_kbuild(store)
        out, err = full.communicate(timeout=120)
        assert full.returncode == 1 and b"Traceback" not in err, err.decode()
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and "no space left on the device" in lines[0], lines
        sp.run(["mount", "-o", "remount,size=64m", str(store)], check=True)  # space is freed
        done = start_kbuild(store)
        assert done.wait(timeout=120) == 0, done.communicate()[1].decode()
        make_store(clean, 1)
        (clean / "Kbuildfile.py").write_text(BIG_PAGES)
        assert start_kbuild(clean).wait(timeout=120) == 0
        assert tree(store, temporaries=True) == tree(clean)
        assert (store / "kbuild.lock").read_bytes() == (clean / "kbuild.lock").read_bytes()
    finally:
        sp.run(["umount", "-l", str(store)], capture_output=True)


@pytest.mark.parametrize("after", [1, 3])
def test_a_full_disk_that_rolls_the_state_back_stops_with_one_line(after, tmp_path, monkeypatch):
    """SQLite answers some full disks by rolling the whole transaction back itself; the commit
    that follows then finds none ("cannot commit - no transaction is active"): still one line."""
    import sqlite3

    from kbuild.engine.state import State

    store, clean = tmp_path / "store", tmp_path / "clean"
    make_store(store, 0)
    assert kbuild(store).exit_code == 0
    make_store(store, 1)
    real = State.write_memos
    seen = []

    def full_and_rolled_back(self):
        if self._unwritten:
            seen.append(1)
            if len(seen) >= after:
                self._unwritten.clear()
                if self.db.in_transaction:  # as SQLite does after SQLITE_FULL in a transaction
                    self.db.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")
        return real(self)

    with monkeypatch.context() as patch:
        patch.setattr(State, "write_memos", full_and_rolled_back)
        patch.setattr("kbuild.engine.state.WRITE_BATCH", 4)  # batches written mid-build, to fail there too
        stopped = kbuild(store)
    assert stopped.exception is None or isinstance(stopped.exception, SystemExit), repr(stopped.exception)
    stopped_with_one_line_then_ends_clean(stopped, store, clean)
