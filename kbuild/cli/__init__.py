"""The kbuild command line: `main` and its commands, one module per group of commands.

Exit codes: 0 done; 1 the build or a check failed (CI should stop); 2 the command or the
Kbuildfile is wrong; 3 another kbuild holds the store. Commands only parse, call the module
that does the work and print; a failure is a `KbuildError` carrying its exit code.
"""
from __future__ import annotations

from pathlib import Path

import click

from .build import build
from .check import check
from .clean import clean
from .doctor import doctor
from .init import init
from .inspection import explain, graph, logs, status
from .lookup import context, search_command, show
from .session import KbuildError, Session
from .sources import add, spec, view
from .watch import watch


@click.group(invoke_without_command=True)
@click.option("-C", "--directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="Run as if started in this folder.")
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, path_type=Path),
              help="The Kbuildfile.py to use (default: found in this folder or above).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print only failures.")
@click.option("-v", "--verbose", is_flag=True, help="Print every query that ran and why.")
@click.pass_context
def main(ctx: click.Context, directory: Path, file: Path | None, debug: bool, quiet: bool, verbose: bool) -> None:
    """Build a knowledge base. With no command: bring the whole store up to date.

    Example: kbuild -C myproject   (then: kbuild check, kbuild watch, kbuild search "...")
    """
    ctx.obj = Session(directory, file, debug, quiet, verbose)
    if ctx.invoked_subcommand is None:
        ctx.invoke(build)


for command in (build, init, add, doctor, clean, search_command, context, show, watch, check, view, spec,
                logs, status, explain, graph):
    main.add_command(command)

__all__ = ["KbuildError", "main"]
