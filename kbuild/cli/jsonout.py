"""`--json`, one flag for every command an agent reads: the answer as JSON on stdout, and a
failure as JSON too (schema kbuild.error/1, docs/json.md), with the same exit code and no traceback."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from .session import FAILED, WRONG, KbuildError, Session

F = TypeVar("F", bound=Callable[..., Any])


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print JSON (a versioned schema: docs/json.md); failures too.")(f)


def emit(answer: dict[str, Any]) -> None:
    click.echo(json.dumps(answer, indent=2, ensure_ascii=False))


def _fail(message: str, exit_code: int) -> click.exceptions.Exit:
    from ..services.answers import error_answer

    emit(error_answer(message, exit_code))
    return click.exceptions.Exit(exit_code)


class JsonCommand(click.Command):
    """A command with `--json`: given the flag, wrong arguments and failures print kbuild.error/1."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = _before_dashes(args)  # a copy: the parser consumes the list
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if "--json" not in given:
                raise
            raise _fail(exc.format_message(), WRONG) from None

    def invoke(self, ctx: click.Context) -> Any:
        if not ctx.params.get("as_json"):
            return super().invoke(ctx)
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise
        except click.ClickException as exc:  # KbuildError among them
            raise _fail(exc.format_message(), exc.exit_code) from None
        except Exception as exc:
            session = ctx.find_object(Session)
            if session is not None and session.debug:  # --debug shows the traceback
                raise
            raise _fail(f"{type(exc).__name__}: {exc}", FAILED) from None


def _before_dashes(args: Sequence[str]) -> list[str]:
    return list(args[: args.index("--")] if "--" in args else args)


__all__ = ["JsonCommand", "KbuildError", "emit", "json_option"]
