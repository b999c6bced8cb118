"""Semantic vectors of the search index: one per section, in the order of sections.json, in
kb/PROJECT/search-index/vectors.npy (float32, normalised) with vectors.json saying which
embedder made them. Only when the Kbuildfile turns semantic ranking on (`semantic=`); off, the
project has no vectors and search ranks by words alone.

Incremental like the index: `source_vectors` reads one source's sections and is re-run only when
they changed; an endpoint's vectors come from the call cache by each section's text, so only
the sections whose words changed are sent (kbuild/retrieval/embedding.py).
"""
from __future__ import annotations

import io
import json
from typing import Any

from kbuild.retrieval.embedding import EmbeddingError, embedder_for, pack, unpack
from kbuild.engine import Problem, QueryFailed, rule
from kbuild.retrieval import embedding

from .facts import text
from .search_index import SourceSections, index_folder, source_sections
from .settings import KnowledgeContext
from .sources import project_outline

FORMAT = 1  # of vectors.json; kbuild/retrieval/search.py refuses another


def section_words(section: dict[str, Any], lines: list[str]) -> str:
    """What a section's vector is made of: its breadcrumb and its own words (a summary: its line)."""
    crumb = " › ".join(section["crumb"])
    if section["kind"] != "section":
        return f"{crumb}\n{section['line']}"
    return crumb + "\n" + "\n".join(lines[section["start"] - 1:section["end"]])


# the model's code by name (read, not imported: numpy stays out of a no-op build)
@rule(version=2, uses=(section_words, SourceSections.of, embedding, "kbuild.retrieval.sentence_model"),
      settings=("semantic",))
async def source_vectors(ctx: KnowledgeContext, project: str, source: str) -> dict[str, Any]:
    """The vector of each of a source's sections, in source_sections' order (base64 float32)."""
    joined = SourceSections.of(await ctx.query(source_sections(project, source)))
    sections = [json.loads(line) for line in joined.lines]
    lines = (await ctx.query(text(project, source))).text.split("\n")
    try:
        vectors = await embedder_for(ctx.settings.semantic).embed(ctx, [section_words(s, lines) for s in sections])
    except EmbeddingError as exc:
        raise Problem(f"{ctx.query_id}: {exc}") from None
    return {"dims": int(vectors.shape[1]) if len(sections) else 0, "vectors": pack(vectors)}


@rule(version=2, uses=(index_folder, SourceSections.of), settings=("store", "semantic"))
async def search_vectors(ctx: KnowledgeContext, project: str) -> int:
    """kb/PROJECT/search-index/vectors.npy and vectors.json, when semantic ranking is on; the
    number of vectors. A source whose vectors failed has zero rows (never ranked by meaning)."""
    semantic = ctx.settings.semantic
    if semantic is None:
        return 0
    import numpy as np

    outline = await ctx.query(project_outline(project))
    sections = await ctx.query_all([source_sections(project, s) for s in outline.sources], return_failures=True)
    kept = [s for s, found in zip(outline.sources, sections) if not isinstance(found, QueryFailed)]
    vectors = await ctx.query_all([source_vectors(project, s) for s in kept], return_failures=True)
    found = [v for v in vectors if not isinstance(v, QueryFailed) and v["dims"]]
    dims = found[0]["dims"] if found else 0
    rows = []
    for source, got, vector in zip(kept, [s for s in sections if not isinstance(s, QueryFailed)], vectors):
        count = len(SourceSections.of(got).lines)
        if isinstance(vector, QueryFailed) or (count and vector["dims"] != dims):
            ctx.warn(f"{source}: no semantic vectors ({vector if isinstance(vector, QueryFailed) else 'mixed sizes'}); "
                     "its sections are ranked by their words only")
            rows.append(np.zeros((count, dims), dtype=np.float32))
        else:
            rows.append(unpack(vector["vectors"], dims))
    matrix = np.concatenate(rows) if rows else np.zeros((0, dims), dtype=np.float32)
    folder = index_folder(ctx.settings.store, project)
    buffer = io.BytesIO()
    np.save(buffer, matrix.astype("<f4"), allow_pickle=False)
    ctx.write(f"{folder}/vectors.npy", buffer.getvalue())
    meta = {"format": FORMAT, "embedder": embedder_for(semantic).identity(), "count": len(matrix), "dims": dims}
    ctx.write(f"{folder}/vectors.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return len(matrix)
