"""Writing a page of the store: the file, and the verdict of its links and secrets with its hash,
which `kbuild check` reads back from the lock instead of scanning the page again."""
from __future__ import annotations

from kbuild.checks.pages import note_page

from .settings import KnowledgeContext


def write_page(ctx: KnowledgeContext, path: str, text: str, *, code: bool = False) -> None:
    """Write the page `path` (under the store, so the rule reads the `store` setting); `code`:
    it quotes a source that is code, whose quote holds no links."""
    ctx.write(path, text)
    note_page(ctx, path, text, ctx.root / ctx.settings.store.root, code=code)
