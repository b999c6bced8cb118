"""The kbuild command line: `main` and its commands, one module per group of commands.

Exit codes: 0 done; 1 the build or a check failed (CI should stop); 2 the command or the
Kbuildfile is wrong; 3 another kbuild holds the store. Commands only parse, call the module
that does the work and print; a failure is a `KbuildError` carrying its exit code.
"""
from __future__ import annotations

import difflib
import importlib
import os
from pathlib import Path

import click

from .session import KbuildError, Session

# Each command with its module, imported when it runs: `kbuild --help` and a `kbuild` with
# nothing to do import no engine, rules or model. The line is the command's own first line of
# help (tests/test_cli.py holds them equal).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "add": ("sources", "add", "List a source in kb/PROJECT/sources.yml (creating the project), keeping its comments."),
    "build": ("build", "build", "Bring the store up to date (the command to run after `git pull`)."),
    "cache": ("cache", "cache", "The cache of model calls: where it is, its size, and its hit rate over recent builds."),
    "check": ("check", "check", "Fail (exit 1) while any page is stale, edited by hand, dangling, ungrounded, "
                                "unbuilt or orphaned."),
    "clean": ("clean", "clean", "Drop the local state in .kbuild/ (rebuildable from the lock and the call cache)."),
    "confirm": ("learn", "confirm", "Confirm a candidate note (ID or PROJECT/ID): its pages no longer warn that it is "
                                    "unconfirmed."),
    "context": ("lookup", "context", "Compose a context for a coding agent from the store, within a token budget."),
    "doctor": ("doctor", "doctor", "Check the setup, read-only: each line PASS, WARN or FAIL with what to do; "
                                   "exit 1 on FAIL."),
    "eval": ("eval", "eval_command", "Recall at budget: the share of QUESTIONS whose answer regex is in the composed "
                                     "context."),
    "explain": ("inspection", "explain", "Why a query or a generated file would rebuild, what it read and what "
                                         "reads it."),
    "export": ("bundles", "export", "Write PROJECT's facts, notes, tombstones and source descriptions to BUNDLE (a new "
                                    "folder, or NAME.tar.gz)."),
    "forget": ("learn", "forget", "Forget a note (ID or PROJECT/ID): a tombstone replaces it, and the build it runs "
                                  "removes or rebuilds every page built on it; cached and logged calls holding its "
                                  "words are deleted."),
    "help": ("help", "help_command", "Say what a command does and takes: `kbuild help add` is `kbuild add --help`."),
    "graph": ("inspection", "graph", "Print the recorded dependency graph (edges point from a query to what it "
                                     "read), whole or around one PAGE (a generated file or a query id): what it is "
                                     "built on and what is built on it."),
    "import": ("bundles", "import_command", "Merge a bundle into the store by id and hash: a conflict is kept for a "
                                            "person, never overwritten."),
    "init": ("init", "init", "Start a knowledge base in DIRECTORY: a commented Kbuildfile.py, kb/ and .gitignore "
                             "lines."),
    "learn": ("learn", "learn", "Apply a delta (JSON, docs/learning.md) of notes learned while working: add, append, "
                                "supersede, withdraw."),
    "logs": ("inspection", "logs", "Every model call: prompt, response, tokens, latency, cost, and whether the "
                                   "cache answered."),
    "merge-lock": ("merge", "merge_lock", "Merge two sides of kbuild.lock into OURS, as git's merge driver (%O %A %B)."),
    "merge-sources": ("merge", "merge_sources", "Merge two sides of a sources.yml into OURS entry by entry, as git's "
                                                "merge driver (%O %A %B %P)."),
    "mcp": ("serve", "mcp", "Serve the store to MCP clients (Claude Code, Cursor...) over stdio, read-only: "
                            "never builds."),
    "plugins": ("plugins", "plugins", "The installed plug-ins with their versions, and the formats and backends each "
                                      "provides."),
    "remove": ("sources", "remove", "Take a source out of kb/PROJECT/sources.yml; the next build removes its pages."),
    "search": ("lookup", "search_command", "BM25 over the sections of the facts and their summaries (the index the build "
                                           "writes), then the other index lines; every lookup is logged."),
    "show": ("lookup", "show", "Print a page with its parent and children, to walk the store up and down."),
    "spec": ("sources", "spec", "Specs: what a coding agent implements, written from a view."),
    "status": ("inspection", "status", "What is stale, grouped by what changed, and what a build would run."),
    "view": ("sources", "view", "Views written on request (one feature, use case or question)."),
    "watch": ("watch", "watch", "Build, then rebuild after every burst of edits to sources, sources.yml, "
                                "Kbuildfile.py or rules."),
}


# `kbuild --help` in groups, everyday work first; plumbing (git's merge drivers) is not listed
GROUPS: dict[str, tuple[str, ...]] = {
    "Build and check": ("build", "check", "watch", "status", "clean"),
    "Sources, views and specs": ("init", "add", "remove", "view", "spec"),
    "Read the store": ("search", "context", "show", "eval", "mcp"),
    "Notes learned from work": ("learn", "confirm", "forget", "export", "import"),
    "Inspect and diagnose": ("explain", "graph", "logs", "cache", "doctor", "plugins", "help"),
}
PLUMBING = ("merge-lock", "merge-sources")

GLOBAL_FLAGS = {"-q", "--quiet", "-v", "--verbose", "--debug"}
GLOBAL_WITH_VALUE = {"-C", "--directory", "-f", "--file"}


def _global_option(arg: str) -> bool:
    return arg in GLOBAL_FLAGS or arg in GLOBAL_WITH_VALUE or arg.split("=", 1)[0] in ("--directory", "--file")


class Commands(click.Group):
    """The commands of COMMANDS, each imported when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        command: click.Command = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The command named first; a name that is none gets the nearest ones (`kbuild buidl`:
        did you mean build?), as git answers."""
        name = click.utils.make_str(args[0])
        if name not in COMMANDS and not name.startswith("-"):
            near = difflib.get_close_matches(name, list(COMMANDS), n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
            ctx.fail(f"No such command {name!r}.{hint} `kbuild --help` lists them.")
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Global options are taken after the command too (`kbuild build -q`, `kbuild status -C
        docs`), as git takes them; none of the commands has an option of those names. Not after
        `--`."""
        at = 0
        while at < len(args) and args[at] not in COMMANDS:  # past the global options and their values
            at += 2 if args[at] in GLOBAL_WITH_VALUE else 1
        if at < len(args):
            end = args.index("--", at) if "--" in args[at:] else len(args)
            moved: list[str] = []
            kept: list[str] = []
            after = iter(args[at + 1:end])
            for arg in after:
                if _global_option(arg):
                    moved.append(arg)
                    if arg in GLOBAL_WITH_VALUE:
                        moved.append(next(after, ""))  # its value (a missing one: click says so)
                else:
                    kept.append(arg)
            args = [*args[:at], *moved, args[at], *kept, *args[end:]]
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, names in GROUPS.items():
            with formatter.section(title):
                formatter.write_dl([(name, COMMANDS[name][2]) for name in names])
        formatter.write_paragraph()
        formatter.write_text("`kbuild help COMMAND` (or `kbuild COMMAND --help`) tells more of one command.")


@click.group(cls=Commands, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="Run as if started in this folder.")
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, path_type=Path),
              help="The Kbuildfile.py to use (default: found in this folder or above).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print only failures.")
@click.option("-v", "--verbose", is_flag=True, help="Print every query that ran and why.")
@click.version_option(package_name="kbuild", message="kbuild %(version)s")
@click.pass_context
def main(ctx: click.Context, directory: Path, file: Path | None, debug: bool, quiet: bool, verbose: bool) -> None:
    """Build a knowledge base. With no command: bring the whole store up to date.

    Example: kbuild -C myproject   (then: kbuild check, kbuild watch, kbuild search "...")
    """
    ctx.obj = Session(directory, file, debug, quiet, verbose)
    if os.environ.get("NO_COLOR"):  # https://no-color.org: set and not empty
        ctx.color = False
    elif os.environ.get("FORCE_COLOR"):
        ctx.color = True
    if ctx.invoked_subcommand is None:
        from .build import build

        ctx.invoke(build)


__all__ = ["KbuildError", "main"]
