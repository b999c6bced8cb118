"""The source texts a rule's fingerprint is made of, kept between builds.

inspect.getsource tokenizes a function to find its end: about 4 ms a rule, most of a no-op
build with twenty rules. So the texts are kept in the engine's state, by file, size, mtime and
the function's place in it, and a build reads them back instead of tokenizing again.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any


class SourceTexts:
    """Source texts by place: those a build was given from the state, and those it looked up."""

    def __init__(self, recorded: Mapping[str, str] | None = None) -> None:
        self.recorded = dict(recorded or {})
        self._texts = dict(self.recorded)
        self._used: set[str] = set()

    def source_of(self, fn: Any) -> str:
        """The source text, so that the fingerprint is the same on every Python version and
        machine.

        A module's text is its file's, a package's every file's below it (its submodules, imported
        or not). A string names a module or package the same way, read without importing it.
        """
        if isinstance(fn, str) or isinstance(fn, ModuleType) and hasattr(fn, "__path__"):
            return _files_text(fn)
        key = _place(fn)
        if key:
            self._used.add(key)
            known = self._texts.get(key)
            if known is not None:
                return known
        try:
            source = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            code = getattr(fn, "__code__", None)
            return code.co_code.hex() if code else repr(fn)
        if key:
            self._texts[key] = source
        return source

    def to_record(self) -> dict[str, str] | None:
        """The texts this build looked up, to keep for the next one; None when there is nothing
        new to keep (none looked up, or the same as recorded)."""
        used = {k: self._texts[k] for k in self._used if k in self._texts}
        return used if used and used != self.recorded else None


def _files_text(module: ModuleType | str) -> str:
    spec = importlib.util.find_spec(module) if isinstance(module, str) else module.__spec__
    if spec is None or spec.origin is None:
        raise ValueError(f"`uses` names {module!r}, which is not an importable module")
    files = sorted(Path(spec.origin).parent.rglob("*.py")) if spec.submodule_search_locations else [Path(spec.origin)]
    return "".join(f.read_text() for f in files)


def _place(fn: Any) -> str | None:
    """Where a function's or a class's text is: its file with the file's size and mtime, its name
    and line (a class: its name; inspect finds a class's text by parsing its whole file, which
    every build did again before its text was kept)."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        filename, line = code.co_filename, code.co_firstlineno
    elif isinstance(fn, type) and getattr(sys.modules.get(fn.__module__), "__file__", None):
        filename, line = sys.modules[fn.__module__].__file__, 0
    else:
        return None
    try:
        st = os.stat(filename)
    except OSError:
        return None
    if time.time_ns() - st.st_mtime_ns < 2_000_000_000:  # git's racy rule: an edit in this tick may not show
        return None
    return f"{filename}:{st.st_size}:{st.st_mtime_ns}:{fn.__qualname__}:{line}"
