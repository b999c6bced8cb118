"""Retrieval: finding what the store says about a question.

- `search`: the sections of the facts ranked by BM25 (and by meaning, with `semantic=`), and a
  context cut to a token budget (`kbuild search`, `kbuild context`, the MCP tools);
- `topic`: the sentences of a project that speak to a view on request;
- `embedding`: the embedders that rank by meaning;
- `evaluate`: recall at a token budget over a questions file (`kbuild eval`).
"""
