"""`kbuild init`: start a knowledge base."""
from __future__ import annotations

from pathlib import Path

import click

from ..services import scaffold
from .session import WRONG, KbuildError


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
def init(directory: Path) -> None:
    """Start a knowledge base in DIRECTORY: a commented Kbuildfile.py, kb/ and .gitignore lines.

    Also .gitattributes (kb/ and kbuild.lock generated, merged by kbuild's merge drivers, which
    it registers in the git repository's config), and a .mcp.json that runs `kbuild mcp` for MCP clients (printed instead when one exists).

    Example: kbuild init myproject
    """
    try:
        kbuildfile = scaffold.start(directory)
    except FileExistsError as exc:
        raise KbuildError(f"{exc.args[0]} exists already; edit it, or remove it to start again", WRONG) from None
    click.echo(f"wrote {kbuildfile}, {directory / 'kb'}/, .gitignore lines for .kbuild/ and .gitattributes")
    why_not = scaffold.setup_git(directory)
    if why_not is None:
        click.echo("set up git's merge drivers for kbuild.lock and the generated pages (git config merge.kbuild-*)")
    else:
        click.echo(f"git's merge drivers not set up ({why_not}); after `git init` (and in every clone) run: "
                   + scaffold.git_config_command())
    if scaffold.write_mcp_config(directory):
        click.echo(f"wrote {directory / scaffold.MCP_FILE}: MCP clients (Claude Code, Cursor...) reach the store "
                   "through `kbuild mcp`")
    else:
        click.echo(f"{directory / scaffold.MCP_FILE} exists: add this server to it, for MCP clients to reach "
                   "the store:\n" + scaffold.mcp_snippet().rstrip())
    click.echo("next: kbuild add PROJECT PATH_OR_URL, then kbuild")
