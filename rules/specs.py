"""Specs: requirements a coding agent implements, written from a view, each linked to its facts.

Before a spec is written, code checks every requirement against the view statements it cites:
its numbers, RFC 2119 keywords, code names and quoted terms must be there (kbuild.text.obligations).
A view that writes no keyword in capitals states its rules in plain English: its lower-case
"must", "shall" and "should" oblige (kbuild.text.obligations.plain_obligations).
"""
from __future__ import annotations

from typing import Any

from kbuild.notes import note as notes
from kbuild.checks.grounding import unsupported
from kbuild.engine import Problem
from kbuild.text.obligations import acceptance_failures, normative_keyword, same_obligation
from kbuild.text import quantities
from kbuild.store.layout import link
from kbuild.checks import grounding
from kbuild.text import obligations
from kbuild.text import prose

from .guard import unsupported_claims, write_grounded
from .settings import KnowledgeContext, model_rule
from .sources import listing
from .values import SpecPage
from .views import view_parts, view_sections


def once_each(requirements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each obligation once: a requirement the sources restate (a summary of the rules, the same
    rule in two sections) is kept where it first stands, citing the facts of both."""
    kept: list[dict[str, Any]] = []
    for req in requirements:
        first = next((k for k in kept if same_obligation(k["statement"], req["statement"])), None)
        if first is None:
            kept.append({**req, "cites": list(req["cites"])})
        else:
            first["cites"] += [ref for ref in req["cites"] if ref not in first["cites"]]
    return kept


@model_rule("spec", "grounding", version=6, settings=("store", "label"),
            uses=(once_each, unsupported, view_parts, view_sections, notes, write_grounded, unsupported_claims, grounding,
                  prose, obligations, quantities), returns=SpecPage)
async def spec_page(ctx: KnowledgeContext, project: str, name: str) -> SpecPage:
    store = ctx.settings.store
    listed = await ctx.query(listing(project))
    request = next(s for s in listed.specs if s.name == name)
    _, sections = await view_sections(ctx, project, request.view)
    statements = [{"text": st.text, "cites": st.cites, "origin": sec.origin}
                  for sec in sections for st in sec.statements]
    requirements = once_each(await ctx.settings.backend.write_spec(ctx, name, statements))
    plain = obligations.plain_obligations([st["text"] for st in statements])
    path = store.spec(project, name)
    lines = [f"# Spec: {name}\n",
             f"_What is required to be delivered, written from the [{request.view} view]({link(path, store.view(project, request.view))}). "
             f"Every requirement links to the facts that support it. Requirements: {ctx.settings.label}._\n",
             f"Up: [specs](index.md) · [{project}](../../index.md)\n", "## Requirements\n"]
    origins = {ref: st["origin"] for st in statements for ref in st["cites"]}
    note_ids = {src.id for src in listed.sources if src.kind == "note"}

    def unconfirmed(refs: list[str]) -> list[str]:
        """The notes among the cited facts' sources that nobody confirmed: a requirement drawn
        from one is a lead, not a settled rule (docs/learning.md)."""
        found = []
        for source in sorted({ref.split("/", 1)[0] for ref in refs} & note_ids):
            try:
                header = notes.parse(ctx.read(store.note(project, source)), store.note(project, source)).header
            except (OSError, notes.NoteError):
                found.append(source)
                continue
            if header.status != "confirmed":
                found.append(source)
        return found

    claims: list[tuple[str, list[str]]] = []
    for n, req in enumerate(requirements, start=1):
        cited = [ref for ref in req["cites"] if ref in origins]
        if not cited:
            raise Problem(f"{project}/specs/{name}: requirement R{n} cites no fact of its view")
        # what the view says of those facts: the grounded statements a requirement is written from
        texts = [st["text"] for st in statements if set(st["cites"]) & set(cited)]
        missing = unsupported(req["statement"], texts)
        if missing:
            raise Problem(f"{project}/specs/{name}: requirement R{n} says {', '.join(missing)}, "
                          "which its facts do not; the spec was not written")
        if normative_keyword(req["statement"], plain) is None:
            wanted = ("must, shall or should (its view writes no keyword in capitals)" if plain
                      else "RFC 2119 keyword (MUST, SHALL, SHOULD, MAY ...)")
            raise Problem(f"{project}/specs/{name}: requirement R{n} carries no {wanted} used as one; "
                          "the spec was not written")
        untestable = acceptance_failures(req["statement"], req["acceptance"])
        if untestable:
            raise Problem(f"{project}/specs/{name}: the acceptance of R{n} {'; '.join(untestable)}")
        claims.append((req["statement"], texts))
        links = " ".join(f"([{ref.split('/', 1)[1]}]({link(path, store.fact(origins[ref], *ref.split('/', 1)))}))"
                         for ref in cited)
        lines.append(f"**R{n}.** {req['statement']} {links}\n")
        leads = unconfirmed(cited)
        if leads:
            lines.append(f"- Not settled: drawn from a note nobody confirmed ({', '.join(leads)}); confirm it "
                         "(`kbuild confirm`) before implementing this.\n")
        lines.append(f"- Acceptance: {req['acceptance']}\n")
    if not requirements:
        lines.append(f"**A gap.** The {request.view} view states no requirement (no MUST, SHALL, SHOULD, "
                     "MAY or REQUIRED, nor, where it writes none in capitals, a must, shall or should); nothing "
                     "here is for a coding agent to implement yet.\n")
    page = "\n".join(lines).rstrip() + "\n"
    await write_grounded(ctx, path, page, claims)
    return SpecPage(path=path, requirements=len(requirements), view=request.view)
