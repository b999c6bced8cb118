"""Where the sources of a project disagree: pairs of statements of two sources about one subject
that give one attribute two values (kbuild.text.disagreement), each quoted and cited, never
resolved by dropping one.

Code picks the candidates over the statements that state a limit or oblige (`fact_claims`, one
query per fact, cut off when its sentences did not change). Each pair of facts with a candidate
between them is judged by a query of its own (`disagreement_verdict`, keyed by the two facts), so
a verdict is read again only when one of its two facts changes. Offline the verdict is the
code's own. The project's confirmed pairs (`project_disagreements`) are recorded in the lock,
where `kbuild check` reads them, and shown in a research project's agreements view.
"""
from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict

from kbuild.checks.store import DISAGREEMENTS
from kbuild.engine import QueryFailed, rule
from kbuild.retrieval import expansion
from kbuild.text import disagreement, obligations, secrets
from kbuild.text import quantities as quantities_module
from kbuild.retrieval.expansion import SameWords
from kbuild.store.layout import Store, link
from kbuild.text.disagreement import candidate, claim, compare, force
from kbuild.text.prose import prose_sentences
from kbuild.text.quantities import quantities
from kbuild.text.secrets import redact

from .facts import chunk, chunks
from .glossary import project_glossary
from .settings import KnowledgeContext, model_rule
from .sources import project_outline


class Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Claims(Value):
    """The sentences of one fact that state a limit or oblige: all a disagreement can be about."""

    ref: str  # "<source>/<slug>"
    sentences: list[str]


class Said(Value):
    """One side of a disagreement: the statement, the fact it came from, its value."""

    source: str
    fact: str  # "<source>/<slug>"
    text: str
    value: str  # "at most 90 days", "MUST"


class Contradiction(Value):
    """Two statements of two sources that give one attribute of one subject two values."""

    attribute: str  # "limit" or "force" (kbuild.text.disagreement.Attribute)
    subject: str  # the words they share
    first: Said
    second: Said

    @property
    def facts(self) -> tuple[str, str]:
        return self.first.fact, self.second.fact


class Contradictions(Value):
    pairs: list[Contradiction]

    def citing(self, facts: set[str]) -> Contradictions:
        """The pairs with a side among `facts` (`<source>/<slug>`): a concept page's, from the facts it cites."""
        return Contradictions(pairs=[p for p in self.pairs if {p.first.fact, p.second.fact} & facts])


class FactPairs(Value):
    """The pairs of facts, of two sources, with a candidate disagreement between them."""

    pairs: list[tuple[str, str]]


@rule(version=1, uses=(disagreement, quantities_module, obligations),
      returns=Claims)
async def fact_claims(ctx: KnowledgeContext, project: str, source: str, slug: str) -> Claims:
    """The sentences of one fact that state a limit or an obligation."""
    text = (await ctx.query(chunk(project, source, slug))).text
    return Claims(ref=f"{source}/{slug}",
                  sentences=[s for s in prose_sentences(text) if quantities(s) or force(s)])


async def _same_words(ctx: KnowledgeContext, project: str) -> SameWords:
    glossary = (await ctx.query_all([project_glossary(project)], return_failures=True))[0]
    return SameWords([] if isinstance(glossary, QueryFailed) else glossary.terms)


@rule(version=1, uses=(_same_words, disagreement, expansion), returns=FactPairs)
async def disagreement_candidates(ctx: KnowledgeContext, project: str) -> FactPairs:
    """Every pair of facts of two sources holding a pair of statements that share their subject
    and give an attribute two values. Only sentences sharing words are compared."""
    outline = await ctx.query(project_outline(project))
    listed = await ctx.query_all([chunks(project, s) for s in outline.sources], return_failures=True)
    places = [(s, p.slug) for s, c in zip(outline.sources, listed) if not isinstance(c, QueryFailed) for p in c.chunks]
    claims = await ctx.query_all([fact_claims(project, s, slug) for s, slug in places], return_failures=True)
    same = await _same_words(ctx, project)
    read = [(c.ref, claim(s, same)) for c in claims if not isinstance(c, QueryFailed) for s in c.sentences]
    by_word: dict[str, list[int]] = defaultdict(list)
    for n, (_, said) in enumerate(read):
        for word in said.subject:
            by_word[word].append(n)
    pairs: dict[tuple[str, str], None] = {}
    for n, (ref, said) in enumerate(read):
        near = {m for word in said.subject for m in by_word[word] if m > n}
        for m in sorted(near):
            other_ref, other = read[m]
            if ref.split("/")[0] == other_ref.split("/")[0] or (ref, other_ref) in pairs:
                continue
            if compare(said, other) is not None:
                pairs[(ref, other_ref)] = None
    return FactPairs(pairs=list(pairs))


@model_rule("disagreement", version=1, uses=(_same_words, disagreement, expansion, secrets), returns=Contradictions)
async def disagreement_verdict(ctx: KnowledgeContext, project: str, first: str, second: str) -> Contradictions:
    """The confirmed disagreements between two facts (`<source>/<slug>` each): read again only
    when one of them changes. A model judges each candidate code found, reasoning first;
    offline, the code's verdict is the verdict."""
    a, b = await ctx.query_all([fact_claims(project, *first.split("/", 1)), fact_claims(project, *second.split("/", 1))])
    same = await _same_words(ctx, project)
    found = []
    for mine, theirs in ((x, y) for x in a.sentences for y in b.sentences):
        judged = candidate(mine, theirs, same)
        if judged is not None and await ctx.settings.backend.judge_disagreement(
                ctx, mine, theirs, judged.attribute.value, f"{judged.first} against {judged.second}"):
            found.append(Contradiction(
                attribute=judged.attribute.value, subject=judged.subject,
                first=Said(source=first.split("/")[0], fact=first, text=redact(mine), value=judged.first),
                second=Said(source=second.split("/")[0], fact=second, text=redact(theirs), value=judged.second)))
    return Contradictions(pairs=found)


@rule(version=1, settings=("store",), returns=Contradictions)
async def project_disagreements(ctx: KnowledgeContext, project: str) -> Contradictions:
    """The project's confirmed disagreements, in source order, recorded in the lock for `kbuild
    check` with the fact pages each side cites."""
    store = ctx.settings.store
    candidates = await ctx.query(disagreement_candidates(project))
    verdicts = await ctx.query_all([disagreement_verdict(project, a, b) for a, b in candidates.pairs],
                                   return_failures=True)
    pairs = [p for v in verdicts if not isinstance(v, QueryFailed) for p in v.pairs]
    ctx.note(DISAGREEMENTS, [{"project": project, "attribute": p.attribute, "subject": p.subject,
                     **{side: {**said.model_dump(), "page": store.fact(project, *said.fact.split("/", 1))}
                        for side, said in (("first", p.first), ("second", p.second))}} for p in pairs])
    return Contradictions(pairs=pairs)


def disagreement_lines(found: Contradictions, page: str, store: Store, project: str) -> list[str]:
    """A "Where the sources disagree" section's lines for a page at `page`: each pair with both
    statements quoted, each citing its fact."""
    def cite(said: Said) -> str:
        target = link(page, store.fact(project, *said.fact.split("/", 1)))
        return f"{said.source} says \"{said.text}\" ([{said.fact.split('/', 1)[1]}]({target}))"

    return [f"- On {p.subject} ({p.attribute}: {p.first.value} against {p.second.value}): {cite(p.first)}; "
            f"{cite(p.second)}." for p in found.pairs]

