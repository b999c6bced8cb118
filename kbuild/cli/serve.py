"""`kbuild mcp`: serve the store to MCP clients over stdio."""
from __future__ import annotations

import click

from .session import FAILED, WRONG, KbuildError, Session, pass_session


@click.command("mcp")
@click.option("--allow-learn", is_flag=True, help="Offer the `learn` tool, which writes notes (kbuild learn); "
                                                  "without it the server is read-only.")
@pass_session
def mcp(session: Session, allow_learn: bool) -> None:
    """Serve the store to MCP clients (Claude Code, Cursor...) over stdio, read-only: never builds.

    Tools search, context, show, status and explain; every page as a resource (kbuild://kb/...).
    With --allow-learn, also `learn`: a delta of notes, as `kbuild learn` applies it.
    The client starts it: see the .mcp.json that `kbuild init` writes.
    Needs the MCP SDK: pip install 'kbuild[mcp]'.

    Example: kbuild -C myproject mcp
    """
    try:
        import mcp.server.mcpserver  # noqa: F401  (an extra: say how to get it, not fail inside the server)
    except ImportError:
        raise KbuildError("kbuild mcp needs the MCP SDK: pip install 'kbuild[mcp]'", FAILED) from None
    from ..services.mcp_server import StoreError, serve
    try:
        serve(session, allow_learn)
    except StoreError as exc:
        raise KbuildError(str(exc), WRONG) from None
    except Exception as exc:  # one line, never a traceback (unless --debug)
        if session.debug:
            raise
        raise KbuildError(f"the MCP server stopped: {type(exc).__name__}: {exc}", FAILED) from None
