"""`kbuild help [COMMAND]`: what `kbuild COMMAND --help` says, for those who type it the other way."""
from __future__ import annotations

import click


@click.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Say what a command does and takes: `kbuild help add` is `kbuild add --help`."""
    group = ctx.parent.command if ctx.parent is not None else None
    if not isinstance(group, click.Group) or ctx.parent is None:
        raise click.UsageError("kbuild help runs inside kbuild")
    if command is None:
        click.echo(group.get_help(ctx.parent))
        return
    found = group.get_command(ctx.parent, command)
    if found is None:
        group.resolve_command(ctx.parent, [command])  # says which commands are near, and stops
        return
    with click.Context(found, info_name=command, parent=ctx.parent) as sub:
        click.echo(found.get_help(sub))
