"""Reading inputs (kbuild/engine/files.py): whole, only regular files, and with a stat that
lets the next build trust the file without reading it again."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kbuild.engine.files import FileHasher, NotARegularFile, read_regular
from kbuild.engine.hashing import hash_bytes


def test_a_file_is_read_whole_whatever_its_size(tmp_path: Path) -> None:
    for size in (0, 1, 4096, (3 << 20) + 7):  # empty, tiny, a page, past one read's megabyte
        path = tmp_path / f"f{size}"
        data = os.urandom(size)
        path.write_bytes(data)
        read, st = read_regular(path)
        assert read == data and st.st_size == size


def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    outcome: list[BaseException] = []

    def read_pipe() -> None:
        try:
            read_regular(tmp_path / "pipe")
        except BaseException as exc:  # noqa: BLE001  (the test looks at what was raised)
            outcome.append(exc)

    reader = threading.Thread(target=read_pipe, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO waited for a writer"
    assert isinstance(outcome[0], NotARegularFile)
    with pytest.raises(IsADirectoryError):
        read_regular(tmp_path)


def test_a_file_read_is_known_by_its_stat_next_time(tmp_path: Path) -> None:
    (tmp_path / "in.md").write_bytes(b"words")
    os.utime(tmp_path / "in.md", ns=(1_000_000_000, 1_000_000_000))  # long ago: not racy
    hasher = FileHasher(tmp_path, dict)
    data, digest = hasher.read("in.md")
    assert (data, digest) == (b"words", hash_bytes(b"words"))
    st = os.stat(tmp_path / "in.md")
    assert hasher.stat_cache["in.md"] == ((st.st_size, st.st_mtime_ns, st.st_ino), digest)
