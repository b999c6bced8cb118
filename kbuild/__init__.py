"""kbuild: an incremental build system for a knowledge base, whose compiler is a language model."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str) -> Any:
    """`kbuild.hookimpl`, which marks a plug-in's hooks (docs/plugins.md), imported when a plug-in
    asks for it: a command that loads no plug-in does not import pluggy."""
    if name == "hookimpl":
        import pluggy

        # the marker kbuild.plugins reads: a marker is its group's name and nothing else, and the
        # top package imports nothing of kbuild, which imports it first
        return pluggy.HookimplMarker("kbuild")
    raise AttributeError(f"module 'kbuild' has no attribute {name!r}")
