"""What every command shares: the options of `kbuild` itself, loading the Kbuildfile, failing."""
from __future__ import annotations

import os

from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # the engine is imported by the commands that run it: `--help` needs none of it
    from ..application import Application
    from ..buildfile import Buildfile
    from ..engine import Engine, Query

# Exit codes, as README.md documents them
FAILED = 1  # the build or a check failed (CI should stop)
WRONG = 2  # the command or the Kbuildfile is wrong
LOCKED = 3  # another kbuild holds the store
WAITING = 4  # `build --batch`: calls were submitted or are still running; run it again to collect


class KbuildError(click.ClickException):
    """One line, in red, and the exit code it stands for; never a traceback."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: IO[Any] | None = None) -> None:
        click.secho(f"kbuild: {self.format_message()}", fg="red", err=True)


@dataclass
class Session:
    directory: Path
    file: Path | None
    debug: bool
    quiet: bool = False
    verbose: bool = False

    def load(self) -> tuple[Buildfile, Engine]:
        """The Kbuildfile (-f, or found from -C upwards), run, and an engine over its rules."""
        from .. import buildfile

        try:
            spec = buildfile.load(self.file or buildfile.find(self.directory.resolve()))
        except buildfile.BuildfileError as exc:
            if self.debug and exc.__cause__:
                raise
            raise KbuildError(str(exc), WRONG) from None
        return spec, spec.engine()

    def kbuildfile(self) -> Path | None:
        """The Kbuildfile this command would run (-f, or found from -C upwards), without running it."""
        from ..buildfile import BuildfileError, find

        try:
            return (self.file or find(self.directory.resolve())).resolve()
        except BuildfileError:
            return None

    def settled_queries(self) -> int | None:
        """How many queries the last build left settled, when nothing changed since (kbuild.uptodate)."""
        from ..records import uptodate
        from ..engine.layout import FOLDER

        path = self.kbuildfile()
        return None if path is None else uptodate.settled_queries(path.parent, path.parent / FOLDER)

    def targets(self, spec: Buildfile) -> list[Query]:
        from ..engine import Query

        try:
            targets = list(spec.targets())
        except Exception as exc:
            if self.debug:
                raise
            raise KbuildError(f"targets() in {spec.path} failed: {type(exc).__name__}: {exc}", WRONG) from None
        bad = [t for t in targets if not isinstance(t, Query)]
        if bad:
            raise KbuildError(f"targets() in {spec.path} must return queries (rule(key)), got {bad[0]!r}", WRONG)
        return targets

    def page(self, spec: Buildfile, what: str) -> str:
        """A page the user named, as the graph names it: relative to the Kbuildfile's folder.
        A path is taken from where the command runs (-C), as git takes it (`./kb/...`, or
        `facts/a/b.md` from inside kb/p/); a query id (`fact("p","a","b")`) is left as it is."""
        if "(" in what or what.endswith(")"):
            return what
        full = Path(os.path.abspath(self.directory / what))
        try:
            return full.relative_to(spec.root).as_posix()
        except ValueError:
            return what  # outside the project: said so by the caller, in the user's words

    @staticmethod
    def application(spec: Buildfile) -> Application:
        """The knowledge base, for the commands that need one."""
        if spec.application is None:
            raise KbuildError(f"{spec.path} defines no knowledge base (kb = knowledge_base(...)); see `kbuild init`",
                              WRONG)
        return spec.application


pass_session = click.make_pass_decorator(Session)
