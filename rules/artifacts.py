"""Views and specs: what a person reads and what a coding agent implements.

A view is built from sections, one per source it draws on, each its own query reading exactly
the facts of that source: when one fact changes, only the section citing it is written again and
the rest of the page stays byte for byte. Every statement cites the fact it came from; the links
are computed here from fact ids, never taken from a model.
"""
from __future__ import annotations

import re
from typing import Any


from kbuild.checks.grounding import unsupported
from kbuild.checks.secrets import redact
from kbuild.engine import Problem, QueryFailed, Rule, rule
from kbuild.model.offline import clean
from kbuild.search import tokens
from kbuild.slicing import split_sentences
from kbuild.store.layout import link
from kbuild.engine.hashing import hash_bytes
from kbuild.store.sources import DEFAULT_VIEWS

from .guard import write_grounded

VIEW_PURPOSE = {
    "digest": "What the project is and does, for anyone",
    "user": "How the system behaves, for someone who uses it",
    "developer": "How it is built, for someone who changes it",
    "agreements": "Where the sources agree, where they disagree, and the open questions",
}
HITS_PER_SOURCE = 8


LIST_MARK = re.compile(r"^([-*+]|\d+[.)])\s+")


def _sentences(span: str) -> list[str]:
    """Whole statements of a fact's prose: no list markers, no lead-ins to a block that is not there."""
    found = (LIST_MARK.sub("", s) for s in split_sentences(clean(span, prose_only=True)))
    return [s for s in found if not s.endswith(":")]


def _unsupported_section(project: str, view: str, title: str, claims: list[str]) -> str:
    listed = "; ".join(f"\"{c[:80]}\"" for c in claims[:5])
    return f"{project}/views/{view}, section {title}: its facts do not support {listed}"


def _claim_owners(claim: str, statements: list[str]) -> list[str]:
    """The statements an unsupported claim, as the grounding model quoted it, belongs to: the one it
    quotes word for word, else those it quotes a part of, else those it joins, else those sharing
    most of its words; every statement when it can be placed nowhere, so that a claim no one can
    place fails every view it may be in."""
    def words(text: str) -> str:
        return " " + " ".join(re.findall(r"\w+", text.lower())) + " "

    said = words(claim)
    if not said.strip():
        return list(statements)
    for quotes in (lambda w: w == said, lambda w: said in w, lambda w: w.strip() and w in said):
        quoted = [s for s in statements if quotes(words(s))]
        if quoted:
            return quoted
    claimed = set(said.split())
    share = {s: len(claimed & set(words(s).split())) / len(claimed) for s in statements}
    best = max(share.values(), default=0.0)
    return [s for s in statements if share[s] == best] if best >= 0.5 else list(statements)


def make_artifact_rules(kb: Any, r: dict[str, Rule], same_meaning: Any) -> list[Rule]:
    store, backend = kb.store, kb.backend
    listing, chunk, fact_groups = r["listing"], r["chunk"], r["fact_groups"]

    async def same_section(ctx, old, new):
        """A section is the same when it cites the same facts in the same order and its statements
        mean the same; then the old words stay and the page above is not rewritten."""
        def cites(section):
            return [st["cites"] for st in section["statements"]]

        if cites(old) != cites(new) or old["title"] != new["title"]:
            return False
        joined = [" \n".join(st["text"] for st in section["statements"]) for section in (old, new)]
        return await same_meaning(ctx, *joined)

    def views_dir(project: str) -> str:
        return f"{store.project(project)}/artifacts/views"

    def specs_dir(project: str) -> str:
        return f"{store.project(project)}/artifacts/specs"

    @rule(version=1, uses=(_sentences,))
    async def fact_sentences(ctx, project, source, group):
        """The prose sentences of each fact of one group of a source, which views select and cite."""
        found = await ctx.query(fact_groups(project, source))
        if group >= len(found["groups"]):
            raise Problem(f"{project}/{source} has no group {group} any more")
        slugs = found["groups"][group]["slugs"]
        texts = await ctx.query_all([chunk(project, source, s) for s in slugs])
        section = found["groups"][group]["section"]
        return {"title": found["title"] if section == found["title"] else f"{found['title']} › {section}",
                "facts": [{"ref": f"{source}/{slug}", "sentences": _sentences(t["text"])} for slug, t in zip(slugs, texts)]}

    @rule(version=1)
    async def view_request(ctx, project, view):
        """A view's request as sources.yml has it (None for a default view), so that sections read
        only their own request and not every edit of sources.yml."""
        listed = await ctx.query(listing(project))
        return next((v for v in listed["views"] if v["name"] == view), None)

    @rule(version=1)
    async def default_views(ctx, project):
        """The default views of a project's kind, so that a group's grounding reads only them and
        not every edit of sources.yml."""
        listed = await ctx.query(listing(project))
        return list(DEFAULT_VIEWS[listed["kind"]])

    @rule(version=2, params={**backend.params("view"), "grounding": backend.params("grounding")},
          uses=(*backend.code, _unsupported_section),
          prompts=[*backend.prompts("view"), *backend.prompts("grounding")], cutoff=same_section)
    async def view_section(ctx, project, view, origin, source, group):
        """One section of a view: what one group of a source's facts says to it (for a view on
        request, group -1: the facts of the source that the ranking found).

        The code checks are made here. The model's grounding is asked here only for a view on
        request; a default view's section is grounded with the other default views' sections of
        its group (group_grounding), and nothing reads it but checked_section and that query."""
        request = await ctx.query(view_request(project, view))
        if request is not None:  # a requested view: the facts the ranking found
            hits = (await ctx.query(view_hits(project, view)))["hits"].get(f"{origin}/{source}", [])
            facts = [{"ref": h["ref"], "sentences": [h["sentence"]]} for h in hits]
            about, kind = request["about"], "requested"
            title = (await ctx.query(fact_groups(origin, source)))["title"]
        else:
            found = await ctx.query(fact_sentences(origin, source, group))
            facts, about, kind, title = found["facts"], VIEW_PURPOSE[view], view, found["title"]
        known = {f["ref"] for f in facts}
        cited_text: dict[str, str] = {}
        for ref in known:
            cited_text[ref] = (await ctx.query(chunk(origin, *ref.split("/", 1))))["text"]

        def grounded(statements: list[dict[str, Any]]) -> list[str]:
            """The code checks: each statement cites a fact of this section, and says no number or
            requirement keyword that its facts do not."""
            failures = []
            for st in statements:
                if not st["cites"] or not set(st["cites"]) <= known:
                    failures.append(f"\"{st['text'][:60]}\" cites no fact of this section")
                    continue
                missing = unsupported(st["text"], [cited_text[r] for r in st["cites"]])
                if missing:
                    failures.append(f"\"{st['text'][:60]}\" says {', '.join(missing)}, which its facts do not")
            return failures

        statements = [{**st, "text": redact(st["text"])}
                      for st in await backend.write_section(ctx, kind, about, title, facts, grounded)]
        failures = grounded(statements)
        if failures:
            raise Problem(f"{project}/views/{view}, section {title}: {'; '.join(failures)}")
        if request is not None and statements:  # a view on request grounds its own section here
            cited = sorted({r for st in statements for r in st["cites"]})
            claims = await backend.ground(ctx, "\n".join(st["text"] for st in statements), [cited_text[r] for r in cited])
            if claims:
                raise Problem(_unsupported_section(project, view, title, claims))
        return {"origin": origin, "source": source, "title": title, "statements": statements}

    @rule(version=1, params={"grounding": backend.params("grounding")}, uses=(*backend.code, _claim_owners),
          prompts=backend.prompts("grounding"))
    async def group_grounding(ctx, project, origin, source, group):
        """The model's grounding of one group's sections in every default view, in one call: each
        statement once and each cited fact's text once, however many views say or cite it.

        Per view whose section passed the code checks: the claims that the facts do not support,
        each given to the views whose statements it names (an empty list: the section passed)."""
        views = await ctx.query(default_views(project))
        found = await ctx.query_all([view_section(project, v, origin, source, group) for v in views],
                                    return_failures=True)
        sections = {v: s for v, s in zip(views, found) if not isinstance(s, QueryFailed)}
        texts = list(dict.fromkeys(st["text"] for s in sections.values() for st in s["statements"]))
        cited = sorted({r for s in sections.values() for st in s["statements"] for r in st["cites"]})
        verdict: dict[str, list[str]] = {v: [] for v in sections}
        if texts:
            facts = await ctx.query_all([chunk(origin, *ref.split("/", 1)) for ref in cited])
            for claim in await backend.ground(ctx, "\n".join(texts), [f["text"] for f in facts]):
                owners = set(_claim_owners(claim, texts))
                for v, s in sections.items():
                    if any(st["text"] in owners for st in s["statements"]):
                        verdict[v].append(claim)
        return {"unsupported": verdict}

    @rule(version=1, uses=(_unsupported_section,))
    async def checked_section(ctx, project, view, origin, source, group):
        """A section that passed every check, code and model: what a view page is built from. A
        section that did not fails here, naming its claims, and the page above it keeps its
        previous version."""
        section = await ctx.query(view_section(project, view, origin, source, group))
        if await ctx.query(view_request(project, view)) is not None:
            return section  # a view on request: its section asked the model itself
        verdict = (await ctx.query(group_grounding(project, origin, source, group)))["unsupported"]
        if view not in verdict:
            raise Problem(f"{project}/views/{view}, section {section['title']}: not grounded")
        if verdict[view]:
            raise Problem(_unsupported_section(project, view, section["title"], verdict[view]))
        return section

    @rule(version=1, uses=(tokens,))
    async def view_hits(ctx, project, view):
        """The facts a requested view draws on: a BM25 ranking of every sentence against the request."""
        listed = await ctx.query(listing(project))
        request = next(v for v in listed["views"] if v["name"] == view)
        origins = [(project, s["id"]) for s in listed["sources"]]
        for other in request["across"]:
            other_listing = await ctx.query(listing(other))
            origins += [(other, s["id"]) for s in other_listing["sources"]]
        outlines = await ctx.query_all([fact_groups(p, s) for p, s in origins], return_failures=True)
        groups = [(p, s, n) for (p, s), o in zip(origins, outlines) if not isinstance(o, QueryFailed)
                  for n in range(len(o["groups"]))]
        found = await ctx.query_all([fact_sentences(p, s, n) for p, s, n in groups], return_failures=True)
        rows = [(p, s, f["ref"], sentence) for (p, s, _), doc in zip(groups, found) if not isinstance(doc, QueryFailed)
                for f in doc["facts"] for sentence in f["sentences"]]
        from rank_bm25 import BM25Okapi  # numpy with it: imported when a requested view is built

        query = tokens(request["about"])
        hits: dict[str, list[dict[str, Any]]] = {}
        if rows and query:
            scores = BM25Okapi([tokens(row[3]) or ["_"] for row in rows]).get_scores(query)
            best = sorted(range(len(rows)), key=lambda i: (-scores[i], i))
            for i in best:
                if scores[i] <= 0 or not set(query) & set(tokens(rows[i][3])):
                    break
                p, s, ref, sentence = rows[i]
                bucket = hits.setdefault(f"{p}/{s}", [])
                if len(bucket) < HITS_PER_SOURCE:
                    bucket.append({"ref": ref, "sentence": sentence, "score": round(float(scores[i]), 4)})
        return {"origins": [f"{p}/{s}" for p, s in origins], "hits": hits}

    @rule(version=2)
    async def view_page(ctx, project, view):
        listed = await ctx.query(listing(project))
        request = next((v for v in listed["views"] if v["name"] == view), None)
        if request is not None:
            ranked = await ctx.query(view_hits(project, view))
            keys = [k for k in ranked["origins"] if k in ranked["hits"]]
            parts = [(*k.split("/", 1), -1) for k in keys]
            purpose = f"On request: {request['about']}"
        else:
            ids = [s["id"] for s in listed["sources"]]
            outlines = await ctx.query_all([fact_groups(project, s) for s in ids], return_failures=True)
            parts = [(project, s, n) for s, o in zip(ids, outlines) if not isinstance(o, QueryFailed)
                     for n in range(len(o["groups"]))]
            purpose = VIEW_PURPOSE[view]
        # a section that fails its checks, code or model, fails the page: the previous version stays whole
        sections = await ctx.query_all([checked_section(project, view, p, s, n) for p, s, n in parts])
        path = f"{views_dir(project)}/{view}.md"
        body = [f"# {view.replace('-', ' ').capitalize()} view of {listed['title'] or project}\n",
                f"_{purpose}. Every statement cites the fact it comes from. Statements: {backend.label}._\n",
                f"Up: [views](index.md) · [{project}](../../index.md)\n"]
        summary = ""
        for section in sections:
            if isinstance(section, QueryFailed) or not section["statements"]:
                continue
            fact_root = store.project(section["origin"])
            body.append(f"## {section['title']}\n")
            for statement in section["statements"]:
                cites = " ".join(
                    f"([{ref.split('/', 1)[1]}]({link(path, f'{fact_root}/facts/{ref}.md')}))" for ref in statement["cites"])
                body.append(f"- {statement['text']} {cites}")
                summary = summary or statement["text"]
            body.append("")
        if not summary:
            about = request["about"] if request else purpose
            body.append(f"**A gap.** Nothing in the sources of this project speaks to: {about}. "
                        "Add a source that does, or ask for a view on something the sources cover.\n")
        page = "\n".join(body).rstrip() + "\n"
        ctx.write(path, page)  # each section was checked, code and model, before it came here
        ctx.note("grounding", {"passed": True, "by": "sections", "page": hash_bytes(page.encode())})
        return {"path": path, "summary": summary or "(a gap: nothing in the sources speaks to this)",
                "gap": not summary, "sections": [s for s in sections if not isinstance(s, QueryFailed)]}

    @rule(params={**backend.params("spec"), "grounding": backend.params("grounding")},
          uses=(*backend.code, unsupported, write_grounded), prompts=[*backend.prompts("spec"), *backend.prompts("grounding")])
    async def spec_page(ctx, project, name):
        listed = await ctx.query(listing(project))
        request = next(s for s in listed["specs"] if s["name"] == name)
        view = await ctx.query(view_page(project, request["view"]))
        statements = [{**st, "origin": sec["origin"]} for sec in view["sections"] for st in sec["statements"]]
        requirements = await backend.write_spec(ctx, name, statements)
        path = f"{specs_dir(project)}/{name}.md"
        view_link = link(path, view["path"])
        lines = [f"# Spec: {name}\n",
                 f"_What is required to be delivered, written from the [{request['view']} view]({view_link}). "
                 f"Every requirement links to the facts that support it. Requirements: {backend.label}._\n",
                 f"Up: [specs](index.md) · [{project}](../../index.md)\n", "## Requirements\n"]
        origins = {st_ref: st["origin"] for st in statements for st_ref in st["cites"]}
        fact_texts: list[str] = []
        for n, req in enumerate(requirements, start=1):
            cited = [ref for ref in req["cites"] if ref in origins]
            if not cited:
                raise Problem(f"{project}/specs/{name}: requirement R{n} cites no fact of its view")
            texts = [(await ctx.query(chunk(origins[ref], *ref.split("/", 1))))["text"] for ref in cited]
            fact_texts += texts
            missing = unsupported(req["statement"], texts)
            if missing:
                raise Problem(f"{project}/specs/{name}: requirement R{n} says {', '.join(missing)}, "
                              "which its facts do not; the spec was not written")
            links = " ".join(f"([{ref.split('/', 1)[1]}]({link(path, store.project(origins[ref]) + '/facts/' + ref + '.md')}))"
                             for ref in cited)
            lines.append(f"**R{n}.** {req['statement']} {links}\n")
            lines.append(f"- Acceptance: {req['acceptance']}\n")
        if not requirements:
            lines.append(f"**A gap.** The {request['view']} view states no requirement (no SHALL, MUST, SHOULD, "
                         "MAY or \"required\"); nothing here is for a coding agent to implement yet.\n")
        page = "\n".join(lines).rstrip() + "\n"
        claims = "\n".join(f"{r['statement']} Acceptance: {r['acceptance']}" for r in requirements)
        await write_grounded(ctx, backend, path, page, claims, fact_texts)
        return {"path": path, "requirements": len(requirements), "view": request["view"]}

    @rule(version=1)
    async def artifacts(ctx, project):
        listed = await ctx.query(listing(project))
        names = [*DEFAULT_VIEWS[listed["kind"]], *(v["name"] for v in listed["views"])]
        views = await ctx.query_all([view_page(project, v) for v in names], return_failures=True)
        specs = await ctx.query_all([spec_page(project, s["name"]) for s in listed["specs"]], return_failures=True)
        base = f"{store.project(project)}/artifacts"
        view_lines = [f"- [{n}]({n}.md): {v['summary'][:160]}" for n, v in zip(names, views) if not isinstance(v, QueryFailed)]
        spec_lines = [f"- [{s['name']}]({s['name']}.md): {v['requirements']} requirements, from the "
                      f"[{v['view']} view](../views/{v['view']}.md)"
                      for s, v in zip(listed["specs"], specs) if not isinstance(v, QueryFailed)]
        ctx.write(f"{base}/views/index.md", "# Views\n\nUp: [artifacts](../index.md)\n\nEach view with its first "
                  "statement. `kbuild view add` asks for another.\n\n" + "\n".join(view_lines) + "\n")
        ctx.write(f"{base}/specs/index.md", "# Specs\n\nUp: [artifacts](../index.md)\n\nEach spec, one line. "
                  "`kbuild spec add` asks for another.\n\n" + ("\n".join(spec_lines) or "No specs yet.") + "\n")
        ctx.write(f"{base}/index.md", f"# Artifacts of {listed['title'] or project}\n\nUp: [{project}](../index.md)\n\n"
                  "Views and specs written from the facts.\n\n"
                  f"- [views/](views/index.md): {len(view_lines)} views\n- [specs/](specs/index.md): {len(spec_lines)} specs\n")
        return {"views": len(view_lines), "specs": len(spec_lines)}

    return [fact_sentences, view_request, default_views, view_section, group_grounding, checked_section, view_hits,
            view_page, spec_page, artifacts]
