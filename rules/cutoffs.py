"""Early cutoff by meaning: a rebuilt text that means what the old one meant keeps the old text,
and nothing built on it runs again."""
from __future__ import annotations

from kbuild.checks.meaning import Decision, classify

from .settings import KnowledgeContext
from .values import Section


async def same_meaning(ctx: KnowledgeContext, old: str, new: str) -> Decision:
    return await classify(ctx, old, new, ctx.settings.backend)


async def same_section(ctx: KnowledgeContext, old: Section, new: Section) -> bool | Decision:
    """A section is the same when it cites the same facts in the same order and its statements
    mean the same; then the old words stay and the page above is not rewritten."""
    if [st.cites for st in old.statements] != [st.cites for st in new.statements] or old.title != new.title:
        return False
    return await same_meaning(ctx, *(" \n".join(st.text for st in s.statements) for s in (old, new)))
