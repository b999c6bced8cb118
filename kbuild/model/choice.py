"""Which backend a Kbuildfile's model settings choose, among those kbuild and installed plug-ins
register (kbuild.plugins)."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..plugins import one_line, registry
from .backend import Backend
from .settings import ModelSettings


def choose_backend(settings: ModelSettings | dict[str, Any] | None) -> Backend:
    """The backend the settings name, else the OpenAI-compatible one when a key, a base URL or a
    model is named, else the offline one, with a notice that a build prints (not every command
    that reads the Kbuildfile)."""
    try:
        given = settings if isinstance(settings, ModelSettings) else ModelSettings(**(settings or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"model settings: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    name = given.backend or ("openai" if given.asks_for_a_model() else "offline")
    found = registry().backend(name)
    if found is None:
        known = ", ".join(sorted(registry().backends))
        raise ValueError(f"model settings: backend {name!r} is not registered by kbuild or an installed plug-in "
                         f"(registered: {known}); install the plug-in that provides it (`kbuild plugins` lists them)")
    try:
        backend = found.factory(given)
    except Exception as exc:
        if found.plugin.builtin:
            raise
        raise ValueError(f"model settings: backend {name!r} of the plug-in {found.plugin.label} could not start "
                         f"({one_line(exc)}); fix its settings, or upgrade the plug-in") from None
    if not isinstance(backend, Backend):  # one written against an older protocol: say so now, not mid-build
        raise ValueError(f"model settings: backend {name!r} of the plug-in {found.plugin.label} does not meet "
                         "kbuild.model.Backend; upgrade the plug-in (a backend subclasses kbuild.model.Backend, "
                         "which answers for the abilities it lacks)")
    if given.backend is None and name == "offline":
        backend.notice = ("no model configured (OPENAI_API_KEY, OPENAI_BASE_URL or KBUILD_MODEL): using the offline "
                          "backend, which writes extractive pages")
    return backend
