"""kbuild: an incremental build system for a knowledge base, whose compiler is a language model."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str) -> Any:
    """`kbuild.hookimpl`, which marks a plug-in's hooks (docs/plugins.md), imported when a plug-in
    asks for it: a command that loads no plug-in does not import pluggy."""
    if name == "hookimpl":
        from .plugins import hookimpl

        return hookimpl
    raise AttributeError(f"module 'kbuild' has no attribute {name!r}")
