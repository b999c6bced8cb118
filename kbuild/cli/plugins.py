"""`kbuild plugins`: the installed plug-ins, their versions and what each converts or answers."""
from __future__ import annotations

from typing import Any

import click

from .jsonout import JsonCommand, emit, json_option
from .session import FAILED

SCHEMA = "kbuild.plugins/1"  # docs/plugins.md
LISTED = 12  # a plug-in converting more extensions than this is listed by their count


@click.command(cls=JsonCommand)
@json_option
def plugins(as_json: bool) -> None:
    """The installed plug-ins with their versions, and the formats and backends each provides.

    Example: kbuild plugins   (exit 1 when a plug-in cannot be loaded; docs/plugins.md)
    """
    from ..plugins import BackendEntry, Converter, registered_by, registry

    found = registry()
    rows: list[dict[str, Any]] = []
    for plugin in found.plugins:
        converts, backends = registered_by(found, plugin)
        rows.append({"name": plugin.name, "distribution": plugin.distribution, "version": plugin.version,
                     "builtin": plugin.builtin, "converts": converts, "backends": backends, "error": plugin.error})
    taken = []
    for old in found.replaced:
        now = found.converter(old.extension) if isinstance(old, Converter) else found.backend(old.name)
        if isinstance(now, (Converter, BackendEntry)) and now.plugin != old.plugin:
            what = f".{old.extension}" if isinstance(old, Converter) else f"backend {old.name}"
            taken.append({"what": what, "by": now.plugin.label, "instead_of": old.plugin.label})
    if as_json:
        emit({"schema": SCHEMA, "plugins": rows, "taken_over": taken, "problems": list(found.problems)})
    else:
        for row in rows:
            click.echo(_line(row))
        for over in taken:
            click.echo(f"{over['what']}: {over['by']} instead of {over['instead_of']}")
    if found.problems:  # each printed once, as the registry was read
        raise click.exceptions.Exit(FAILED)


def _line(row: dict[str, Any]) -> str:
    who = f"{row['distribution']} {row['version']}" + (" (built in)" if row["builtin"] else "")
    says = []
    if row["converts"]:
        converts = row["converts"]
        says.append(f"converts {len(converts)} extensions" if len(converts) > LISTED else f"converts {' '.join(converts)}")
    if row["backends"]:
        says.append(f"backends {', '.join(row['backends'])}")
    if row["error"]:
        says.append(row["error"])
    return f"{row['name']}: {who}: {'; '.join(says) or 'registers nothing'}"
