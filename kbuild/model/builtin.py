"""kbuild's own backends, registered as a plug-in (kbuild.plugins) on the hook an installed
plug-in uses to add its own, which a Kbuildfile names with `model={"backend": NAME}`. Each is
imported when chosen: the openai package takes 0.8 s to import."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..plugins import RegisterBackend, hookimpl
from .settings import ModelSettings

if TYPE_CHECKING:
    from .backend import Backend


def _offline(settings: ModelSettings) -> Backend:
    from .offline import OfflineBackend

    return OfflineBackend()


def _openai(settings: ModelSettings) -> Backend:
    from .openai_backend import OpenAIBackend

    return OpenAIBackend(settings.resolved())


@hookimpl
def register_backends(register: RegisterBackend) -> None:
    register("offline", _offline)
    register("openai", _openai)
