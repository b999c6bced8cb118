"""`kbuild init`: start a knowledge base."""
from __future__ import annotations

from pathlib import Path

import click

from .. import scaffold
from .session import WRONG, KbuildError


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
def init(directory: Path) -> None:
    """Start a knowledge base in DIRECTORY: a commented Kbuildfile.py, kb/ and .gitignore lines.

    Example: kbuild init myproject
    """
    try:
        kbuildfile = scaffold.start(directory)
    except FileExistsError as exc:
        raise KbuildError(f"{exc.args[0]} exists already; edit it, or remove it to start again", WRONG) from None
    click.echo(f"wrote {kbuildfile}, {directory / 'kb'}/ and .gitignore lines for .kbuild/")
    click.echo("next: kbuild add PROJECT PATH_OR_URL, then kbuild")
