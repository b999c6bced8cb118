"""Plug-ins: converters and model backends that any installed package adds (docs/plugins.md).

A plug-in is a module whose functions are marked `@kbuild.hookimpl`, named by an entry point in
the `kbuild` group of its package's metadata. kbuild's own converters and backends are plug-ins
on the same hooks, registered first: an installed plug-in that registers a format kbuild reads
takes that format over. The registry is read once per process; it imports each plug-in's module
(a plug-in imports its heavy libraries inside its converter, as kbuild's own do).
"""
from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

from .convert.model import Converted

if TYPE_CHECKING:
    from .model.backend import Backend
    from .model.settings import ModelSettings

GROUP = "kbuild"  # the entry-point group a plug-in's package declares
hookspec = pluggy.HookspecMarker(GROUP)
hookimpl = pluggy.HookimplMarker(GROUP)

# kbuild's own plug-ins, registered before any installed one
BUILTIN = ("kbuild.convert.builtin", "kbuild.model.builtin")

ConvertFunction = Callable[[Path], "str | Converted"]  # the source's file -> its Markdown
BackendFactory = Callable[["ModelSettings"], "Backend"]  # the Kbuildfile's model settings -> a backend


class RegisterConverter(Protocol):
    def __call__(self, extension: str, convert: ConvertFunction, *, libraries: Iterable[str] = ()) -> None: ...


class RegisterBackend(Protocol):
    def __call__(self, name: str, factory: BackendFactory) -> None: ...


class Hooks:
    """What a plug-in may implement (each is optional)."""

    @hookspec
    def register_converters(self, register: RegisterConverter) -> None:
        """Call `register(".foo", convert)` for each extension the plug-in converts: `convert(path)`
        returns the file's Markdown (or a kbuild.convert.Converted). `libraries=("name", ...)`
        names the distributions it converts with, whose versions join the fingerprint too."""

    @hookspec
    def register_backends(self, register: RegisterBackend) -> None:
        """Call `register("name", factory)` for each model backend: `factory(model_settings)`
        returns the backend a Kbuildfile names with `model={"backend": "name"}`."""


@dataclass(frozen=True)
class Plugin:
    """One installed plug-in (or kbuild's own), as `kbuild plugins` lists it."""

    name: str  # the entry point's name; the module's for kbuild's own
    distribution: str  # the package that declares it, as pip names it
    version: str
    builtin: bool = False
    error: str | None = None  # why it could not be loaded or could not register, then it adds nothing

    @property
    def label(self) -> str:
        return "kbuild (built in)" if self.builtin else f"{self.distribution} {self.version}"


@dataclass(frozen=True)
class Converter:
    extension: str  # without the dot, lower case
    plugin: Plugin
    convert: ConvertFunction
    libraries: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackendEntry:
    name: str
    plugin: Plugin
    factory: BackendFactory


@dataclass(frozen=True)
class Registry:
    """What every plug-in registered; a later registration of an extension or backend name takes
    it over (kbuild's own are first; installed plug-ins follow in the order of their names)."""

    plugins: tuple[Plugin, ...]
    converters: dict[str, Converter] = field(default_factory=dict)
    backends: dict[str, BackendEntry] = field(default_factory=dict)
    replaced: tuple[Converter | BackendEntry, ...] = ()  # registrations a later plug-in took over
    problems: tuple[str, ...] = ()  # one line each: a plug-in that could not load or register

    def converter(self, extension: str) -> Converter | None:
        return self.converters.get(extension)

    def backend(self, name: str) -> BackendEntry | None:
        return self.backends.get(name)

    def plugin_versions(self) -> dict[str, str]:
        """Each installed plug-in that converts a format, by its version: what a user installs
        on purpose, in the fingerprint of every conversion (a plug-in may take any format over)."""
        return dict(sorted((c.plugin.distribution, c.plugin.version) for c in self.converters.values()
                           if not c.plugin.builtin))

    def library_versions(self, extension: str) -> dict[str, str | None]:
        """The versions of the libraries the converter of `extension` names (None: not
        installed): what decides that format's conversion alone, so that an upgrade of an office
        library converts office files again, and a store without them does not depend on
        whether the library is installed."""
        converter = self.converters.get(extension)
        return {library: installed_version(library) for library in (converter.libraries if converter else ())}


@functools.cache  # a metadata lookup scans sys.path; a text query per source asks it again
def installed_version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _extension(given: object) -> str:
    text = given.lower().removeprefix(".") if isinstance(given, str) else ""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_+-]*", text):
        raise ValueError(f"register({given!r}, ...): an extension is a string like \".foo\"")
    return text


def one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}".rstrip(": ")


def _registrations(plugin: Plugin, implementations: dict[str, Any]) -> list[Converter | BackendEntry]:
    """What `plugin`'s hooks register, in order; raises what they raise (then it registers nothing)."""
    found: list[Converter | BackendEntry] = []

    def register_converter(extension: str, convert: ConvertFunction, *, libraries: Iterable[str] = ()) -> None:
        if not callable(convert):
            raise TypeError(f"register({extension!r}, ...): the converter must be a function of the file's path")
        found.append(Converter(_extension(extension), plugin, convert, tuple(libraries)))

    def register_backend(name: str, factory: BackendFactory) -> None:
        if not isinstance(name, str) or not name or not callable(factory):
            raise TypeError("register(name, factory): a backend's name is a string, its factory a function "
                            "of the model settings")
        found.append(BackendEntry(name, plugin, factory))

    for hook, register in (("register_converters", register_converter), ("register_backends", register_backend)):
        implementation = implementations.get(hook)
        if implementation is not None:
            implementation.function(**{name: register for name in implementation.argnames})
    return found


def _load() -> tuple[pluggy.PluginManager, list[Plugin], list[str]]:
    import importlib

    from . import __version__

    manager = pluggy.PluginManager(GROUP)
    manager.add_hookspecs(Hooks)
    plugins: list[Plugin] = []
    for module in BUILTIN:
        manager.register(importlib.import_module(module), name=module)
        plugins.append(Plugin(module, "kbuild", __version__, builtin=True))
    problems = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        dist = point.dist
        plugin = Plugin(point.name, dist.name if dist else point.value, dist.version if dist else "?")
        try:
            manager.register(point.load(), name=point.name)
        except Exception as exc:  # anything a plug-in's import raises is its own problem, not the build's
            plugin = replace(plugin, error=f"cannot be loaded ({one_line(exc)})")
            problems.append(f"plug-in {plugin.label} {plugin.error}; reinstall it, or uninstall it")
        plugins.append(plugin)
    return manager, plugins, problems


@functools.cache
def registry() -> Registry:
    """Every plug-in's converters and backends, kbuild's own first. A plug-in that cannot be
    loaded, or whose hook raises, adds nothing and is one line of `problems` (printed once)."""
    manager, plugins, problems = _load()
    implementations: dict[str, dict[str, Any]] = {}
    for hook in ("register_converters", "register_backends"):
        for implementation in getattr(manager.hook, hook).get_hookimpls():
            implementations.setdefault(implementation.plugin_name, {})[hook] = implementation
    converters: dict[str, Converter] = {}
    backends: dict[str, BackendEntry] = {}
    replaced: list[Converter | BackendEntry] = []
    for at, plugin in enumerate(plugins):
        if plugin.error is not None:
            continue
        try:
            registered = _registrations(plugin, implementations.get(plugin.name, {}))
        except Exception as exc:
            plugins[at] = replace(plugin, error=f"raised while registering ({one_line(exc)})")
            problems.append(f"plug-in {plugin.label} {plugins[at].error}; it adds nothing until it is fixed")
            continue
        for entry in registered:
            table: dict[str, Any] = converters if isinstance(entry, Converter) else backends
            key = entry.extension if isinstance(entry, Converter) else entry.name
            if key in table:
                replaced.append(table[key])
            table[key] = entry
    for problem in problems:
        print(f"kbuild: {problem}", file=sys.stderr)
    return Registry(tuple(plugins), converters, backends, tuple(replaced), tuple(problems))


def registered_by(registry: Registry, plugin: Plugin) -> tuple[list[str], list[str]]:
    """The extensions and backend names `plugin` provides (those no later plug-in took over)."""
    return ([f".{c.extension}" for c in registry.converters.values() if c.plugin == plugin],
            [b.name for b in registry.backends.values() if b.plugin == plugin])
