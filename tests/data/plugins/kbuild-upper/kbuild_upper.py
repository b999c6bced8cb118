"""A kbuild plug-in: `.foo` files (a title line, then text) as Markdown in capitals; `.boom` files
fail inside the plug-in, as a plug-in with a bug does; and a model backend, "upper", that writes
the offline backend's summaries of facts in capitals."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import kbuild


def foo_to_markdown(path: Path) -> str:
    title, _, body = path.read_text(encoding="utf-8").partition("\n")
    return f"# {title.strip().upper()}\n\n{body.strip().upper()}\n"


def explode(path: Path) -> str:
    raise RuntimeError(f"cannot parse {path.stat().st_size} bytes")


def upper_backend(settings: Any) -> Any:
    from kbuild.model.offline import OfflineBackend

    class UpperBackend(OfflineBackend):
        name = "upper"
        label = "extractive, in capitals (kbuild-upper)"

        def params(self, task: str) -> dict[str, object]:
            return {"backend": self.name, "task": task}

        @property
        def code(self) -> tuple[object, ...]:
            return (*super().code, sys.modules[__name__])

        async def read_chunk(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            reading = await super().read_chunk(*args, **kwargs)
            return {**reading, "summary": reading["summary"].upper()}

    return UpperBackend()


@kbuild.hookimpl
def register_converters(register):
    register(".foo", foo_to_markdown)
    register(".boom", explode)


@kbuild.hookimpl
def register_backends(register):
    register("upper", upper_backend)
