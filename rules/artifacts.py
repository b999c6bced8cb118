"""Views and specs: what a person reads and what a coding agent implements.

A view is built from sections, one per source it draws on, each its own query reading exactly
the facts of that source: when one fact changes, only the section citing it is written again and
the rest of the page stays byte for byte. Every statement cites the fact it came from; the links
are computed here from fact ids, never taken from a model.
"""
from __future__ import annotations

from typing import Any


from kbuild.checks.grounding import unsupported
from kbuild.checks.secrets import redact
from kbuild.engine import Problem, QueryFailed, Rule, rule
from kbuild.model.offline import prose_sentences
from kbuild.requirements import acceptance_failures, normative_keyword
from kbuild.topic import Candidate, Passage, passages, rank
from kbuild.store.layout import link
from kbuild.engine.hashing import hash_bytes
from kbuild.store.sources import DEFAULT_VIEWS

from .guard import plain_text_failures, unsupported_claims, write_grounded

VIEW_PURPOSE = {
    "digest": "What the project is and does, for anyone",
    "user": "How the system behaves, for someone who uses it",
    "developer": "How it is built, for someone who changes it",
    "agreements": "Where the sources agree, where they disagree, and the open questions",
}


SECTION_STATEMENTS = {"digest": 4, "user": 8, "developer": 8, "agreements": 8}


def _unsupported_section(project: str, view: str, title: str, claims: list[str]) -> str:
    return f"{project}/views/{view}, section {title}: {'; '.join(claims[:5])}"


def complete(ctx: Any, values: list[Any]) -> list[Any]:
    """The values, or the first failure raised where the page has an earlier version: a page
    above a failed one keeps that version rather than be made again from the rest, which would
    hide what failed. A page made for the first time lists what failed (QueryFailed values stay
    in the list for the caller to name) rather than not exist, which would leave its links
    dangling."""
    failed = next((v for v in values if isinstance(v, QueryFailed)), None)
    if failed is not None and ctx.built_before:
        raise failed
    return values


def built(values: list[Any]) -> int:
    return sum(not isinstance(v, QueryFailed) for v in values)


def assemble_section(view: str, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A default view's section, by code: the sentences its facts' readings picked for the view,
    word for word, each citing its fact. Taken in turns across the facts up to the section's
    size, so that no one fact fills a digest, then put back in source order."""
    queues = [[(n, i) for i in f["picks"].get(view, [])] for n, f in enumerate(facts)]
    chosen: list[tuple[int, int]] = []
    while len(chosen) < SECTION_STATEMENTS[view] and any(queues):
        for queue in queues:
            if queue and len(chosen) < SECTION_STATEMENTS[view]:
                chosen.append(queue.pop(0))
    return [{"text": facts[n]["sentences"][i], "cites": [facts[n]["ref"]]} for n, i in sorted(chosen)]


def make_artifact_rules(kb: Any, r: dict[str, Rule], same_meaning: Any) -> list[Rule]:
    store, backend = kb.store, kb.backend
    listing, chunk, fact_groups = r["listing"], r["chunk"], r["fact_groups"]
    reading, fact = r["reading"], r["fact"]

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

    @rule(version=4, uses=("kbuild.topic",))
    async def fact_sentences(ctx, project, source, group):
        """The prose sentences of each fact of one group of a source, with the headings each sits
        under, which views on request rank, select and cite."""
        found = await ctx.query(fact_groups(project, source))
        if group >= len(found["groups"]):
            raise Problem(f"{project}/{source} has no group {group} any more")
        slugs = found["groups"][group]["slugs"]
        texts = await ctx.query_all([chunk(project, source, s) for s in slugs])
        section = found["groups"][group]["section"]
        return {"title": found["title"] if section == found["title"] else f"{found['title']} › {section}",
                "facts": [{"ref": f"{source}/{slug}", "passages": [
                    {"text": p.text, "headings": list(p.headings), "paragraph": p.paragraph}
                    for p in passages(t["text"], [found["title"], *(h for h in t["headings"] if h != found["title"])])]}
                    for slug, t in zip(slugs, texts)]}

    @rule(version=1)
    async def view_request(ctx, project, view):
        """A view's request as sources.yml has it (None for a default view), so that sections read
        only their own request and not every edit of sources.yml."""
        listed = await ctx.query(listing(project))
        return next((v for v in listed["views"] if v["name"] == view), None)

    @rule(version=3, params={**backend.params("view"), "grounding": backend.params("grounding"),
                             "statements": SECTION_STATEMENTS},
          uses=(*backend.code, _unsupported_section, assemble_section, unsupported_claims, plain_text_failures,
                "kbuild.checks.grounding", "kbuild.checks.secrets", "kbuild.checks.secret_kinds"),
          prompts=[*backend.prompts("view"), *backend.prompts("grounding")], cutoff=same_section)
    async def view_section(ctx, project, view, origin, source, group):
        """One section of a view: what one group of a source's facts says to it (for a view on
        request, group -1: the facts of the source that the ranking found).

        A default view's section is assembled by code from the sentences each fact's reading
        picked: the source's own words, citing their fact, so there is nothing to ground and no
        call to make. A view on request asks the model over the ranked sentences only, and its
        statements are grounded against the sentences they cite."""
        request = await ctx.query(view_request(project, view))
        if request is None:
            found = await ctx.query(fact_groups(origin, source))
            if group >= len(found["groups"]):
                raise Problem(f"{origin}/{source} has no group {group} any more")
            slugs = found["groups"][group]["slugs"]
            # a section cites fact pages: one that failed its checks fails the section, and the
            # view keeps its previous version rather than link to a page that is not there
            await ctx.query_all([fact(origin, source, s) for s in slugs])
            texts = await ctx.query_all([chunk(origin, source, s) for s in slugs])
            readings = await ctx.query_all([reading(origin, source, s) for s in slugs])
            facts = [{"ref": f"{source}/{slug}", "sentences": prose_sentences(t["text"]), "picks": r["picks"]}
                     for slug, t, r in zip(slugs, texts, readings)]
            section = found["groups"][group]["section"]
            title = found["title"] if section == found["title"] else f"{found['title']} › {section}"
            return {"origin": origin, "source": source, "title": title, "statements": assemble_section(view, facts)}

        hits = (await ctx.query(view_hits(project, view)))["hits"].get(f"{origin}/{source}", [])
        by_fact: dict[str, list[str]] = {}
        for h in hits:
            by_fact.setdefault(h["ref"], []).append(h["sentence"])
        facts = [{"ref": ref, "sentences": sentences} for ref, sentences in by_fact.items()]
        title = (await ctx.query(fact_groups(origin, source)))["title"]
        said = {ref: " ".join(sentences) for ref, sentences in by_fact.items()}

        def grounded(statements: list[dict[str, Any]]) -> list[str]:
            """The code checks: each statement cites a fact of this section, and says no number,
            requirement keyword, code name or quoted term that its cited sentences do not."""
            failures = []
            for st in statements:
                if not st["cites"] or not set(st["cites"]) <= set(said):
                    failures.append(f"\"{st['text'][:60]}\" cites no fact of this section")
                    continue
                missing = unsupported(st["text"], [said[r] for r in st["cites"]])
                if missing:
                    failures.append(f"\"{st['text'][:60]}\" says {', '.join(missing)}, which its facts do not")
                failures += [f"\"{st['text'][:60]}\" {problem}"
                             for problem in plain_text_failures(st["text"], " ".join(said[r] for r in st["cites"]))]
            return failures

        statements = [{**st, "text": redact(st["text"])}
                      for st in await backend.write_section(ctx, "requested", request["about"], title, facts, grounded)]
        failures = grounded(statements)
        if failures:
            raise Problem(f"{project}/views/{view}, section {title}: {'; '.join(failures)}")
        claims = await unsupported_claims(ctx, backend, [(st["text"], [said[r] for r in st["cites"]])
                                                         for st in statements], title)
        if claims:
            raise Problem(_unsupported_section(project, view, title, claims))
        return {"origin": origin, "source": source, "title": title, "statements": statements}

    @rule(version=2, uses=("kbuild.topic", complete))
    async def view_hits(ctx, project, view):
        """The sentences a requested view draws on, ranked across the whole project (kbuild.topic)."""
        listed = await ctx.query(listing(project))
        request = next(v for v in listed["views"] if v["name"] == view)
        origins = [(project, s) for s in listed["ids"]]
        for other in request["across"]:
            other_listing = await ctx.query(listing(other))
            origins += [(other, s) for s in other_listing["ids"]]
        outlines = complete(ctx, await ctx.query_all([fact_groups(p, s) for p, s in origins], return_failures=True))
        groups = [(p, s, n) for (p, s), o in zip(origins, outlines) if not isinstance(o, QueryFailed)
                  for n in range(len(o["groups"]))]
        found = complete(ctx, await ctx.query_all([fact_sentences(p, s, n) for p, s, n in groups],
                                                  return_failures=True))
        candidates = [Candidate(f"{p}/{s}", f["ref"], Passage(x["text"], tuple(x["headings"]), x["paragraph"]))
                      for (p, s, _), doc in zip(groups, found) if not isinstance(doc, QueryFailed)
                      for f in doc["facts"] for x in f["passages"]]
        hits: dict[str, list[dict[str, Any]]] = {}
        for hit in rank(request["about"], candidates):
            hits.setdefault(hit.section, []).append({"ref": hit.ref, "sentence": hit.sentence, "score": hit.score})
        return {"origins": [f"{p}/{s}" for p, s in origins], "hits": hits}

    @rule(version=2, params={"label": backend.label}, uses=(complete,))
    async def view_page(ctx, project, view):
        listed = await ctx.query(listing(project))
        request = next((v for v in listed["views"] if v["name"] == view), None)
        if request is not None:
            ranked = await ctx.query(view_hits(project, view))
            keys = [k for k in ranked["origins"] if k in ranked["hits"]]
            parts = [(*k.split("/", 1), -1) for k in keys]
            purpose = f"On request: {request['about']}"
        else:
            ids = listed["ids"]
            outlines = complete(ctx, await ctx.query_all([fact_groups(project, s) for s in ids], return_failures=True))
            parts = [(project, s, n) for s, o in zip(ids, outlines) if not isinstance(o, QueryFailed)
                     for n in range(len(o["groups"]))]
            purpose = VIEW_PURPOSE[view]
        # a section that fails its checks, code or model, fails the page: the previous version stays whole
        sections = await ctx.query_all([view_section(project, view, p, s, n) for p, s, n in parts])
        path = f"{views_dir(project)}/{view}.md"
        body = [f"# {view.replace('-', ' ').capitalize()} view of {listed['title'] or project}\n",
                f"_{purpose}. Every statement cites the fact it comes from. Statements: {backend.label}._\n",
                f"Up: [views](index.md) · [{project}](../../index.md)\n"]
        summary = ""
        said: set[str] = set()  # a sentence documents repeat is said once, where it first stands
        for section in sections:
            if isinstance(section, QueryFailed):
                continue
            fresh = [st for st in section["statements"] if " ".join(st["text"].lower().split()) not in said]
            if not fresh:
                continue
            fact_root = store.project(section["origin"])
            body.append(f"## {section['title']}\n")
            for statement in fresh:
                said.add(" ".join(statement["text"].lower().split()))
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
        ctx.write(path, page)  # each section was checked before it came here
        ctx.note("grounding", {"passed": True, "by": "sections", "page": hash_bytes(page.encode())})
        return {"path": path, "summary": summary or "(a gap: nothing in the sources speaks to this)",
                "gap": not summary, "sections": [s for s in sections if not isinstance(s, QueryFailed)]}

    @rule(params={**backend.params("spec"), "grounding": backend.params("grounding"), "label": backend.label},
          uses=(*backend.code, unsupported, write_grounded, "kbuild.checks.grounding", "kbuild.requirements"),
          prompts=[*backend.prompts("spec"), *backend.prompts("grounding")],
          version=3)
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
            if normative_keyword(req["statement"]) is None:
                raise Problem(f"{project}/specs/{name}: requirement R{n} carries no RFC 2119 keyword used as one "
                              "(MUST, SHALL, SHOULD, MAY ...); the spec was not written")
            untestable = acceptance_failures(req["statement"], req["acceptance"])
            if untestable:
                raise Problem(f"{project}/specs/{name}: the acceptance of R{n} {'; '.join(untestable)}")
            claims.append((req["statement"], texts))
            links = " ".join(f"([{ref.split('/', 1)[1]}]({link(path, store.project(origins[ref]) + '/facts/' + ref + '.md')}))"
                             for ref in cited)
            lines.append(f"**R{n}.** {req['statement']} {links}\n")
            lines.append(f"- Acceptance: {req['acceptance']}\n")
        if not requirements:
            lines.append(f"**A gap.** The {request['view']} view states no requirement (no MUST, SHALL, SHOULD, "
                         "MAY or REQUIRED); nothing here is for a coding agent to implement yet.\n")
        page = "\n".join(lines).rstrip() + "\n"
        await write_grounded(ctx, backend, path, page, claims)
        return {"path": path, "requirements": len(requirements), "view": request["view"]}

    @rule(version=1, uses=(complete, built))
    async def artifacts(ctx, project):
        listed = await ctx.query(listing(project))
        names = [*DEFAULT_VIEWS[listed["kind"]], *(v["name"] for v in listed["views"])]
        made = complete(ctx, await ctx.query_all([*(view_page(project, v) for v in names),
                                                  *(spec_page(project, s["name"]) for s in listed["specs"])],
                                                 return_failures=True))
        views, specs = made[:len(names)], made[len(names):]
        base = f"{store.project(project)}/artifacts"
        view_lines = [f"- [{n}]({n}.md): {v['summary'][:160]}" if not isinstance(v, QueryFailed)
                      else f"- {n}: not built; run `kbuild` to see why" for n, v in zip(names, views)]
        spec_lines = [f"- [{s['name']}]({s['name']}.md): {v['requirements']} requirements, from the "
                      f"[{v['view']} view](../views/{v['view']}.md)" if not isinstance(v, QueryFailed)
                      else f"- {s['name']}: not built; run `kbuild` to see why" for s, v in zip(listed["specs"], specs)]
        ctx.write(f"{base}/views/index.md", "# Views\n\nUp: [artifacts](../index.md)\n\nEach view with its first "
                  "statement. `kbuild view add` asks for another.\n\n" + "\n".join(view_lines) + "\n")
        ctx.write(f"{base}/specs/index.md", "# Specs\n\nUp: [artifacts](../index.md)\n\nEach spec, one line. "
                  "`kbuild spec add` asks for another.\n\n" + ("\n".join(spec_lines) or "No specs yet.") + "\n")
        ctx.write(f"{base}/index.md", f"# Artifacts of {listed['title'] or project}\n\nUp: [{project}](../index.md)\n\n"
                  "Views and specs written from the facts.\n\n"
                  f"- [views/](views/index.md): {built(views)} views\n- [specs/](specs/index.md): {built(specs)} specs\n")
        return {"views": built(views), "specs": built(specs)}

    return [fact_sentences, view_request, view_section, view_hits,
            view_page, spec_page, artifacts]
