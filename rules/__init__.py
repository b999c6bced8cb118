"""kbuild's default rule set, written on the engine's public API (kbuild.engine).

Installed as `kbuild.rules`. A Kbuildfile.py uses it like this, and may add rules of its own:

    from pathlib import Path
    from kbuild.rules import knowledge_base

    kb = knowledge_base(Path(__file__).parent)
    RULES = kb.rules
    targets = kb.targets
    before_build = kb.before_build
"""
from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from kbuild.retrieval.embedding import SemanticSettings
from kbuild.model import Backend, ModelSettings, choose_backend
from kbuild.store.layout import Store

from .knowledge import KnowledgeBase
from .settings import KnowledgeSettings


def knowledge_base(
    root: str | Path,
    store: str = "kb",
    model: ModelSettings | dict[str, object] | None = None,
    floor_tokens: int = 2000,
    cap_tokens: int = 4000,
    backend: Backend | None = None,
    semantic: SemanticSettings | dict[str, object] | None = None,
) -> KnowledgeBase:
    """The default pipeline over the store `store` (a folder under `root`).

    `model` says how to reach a model (ModelSettings, or a dict of its fields); unset fields
    come from OPENAI_API_KEY, OPENAI_BASE_URL and KBUILD_MODEL, and with neither a key nor a
    base URL the offline backend answers. `floor_tokens`/`cap_tokens` bound the size of a fact.
    `backend` replaces the backend altogether (tests, plugins). `semantic` turns on ranking by
    meaning as well as by words (SemanticSettings, or a dict of its fields: `{"source":
    "local"}` or `{"source": "openai", "model": "text-embedding-3-small"}`); off by default.
    """
    try:
        meaning = SemanticSettings.model_validate(semantic) if isinstance(semantic, dict) else semantic
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"semantic settings: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    settings = KnowledgeSettings(Store(store), backend or choose_backend(model), floor_tokens, cap_tokens, meaning)
    return KnowledgeBase(Path(root).resolve(), settings)


__all__ = ["KnowledgeBase", "ModelSettings", "SemanticSettings", "knowledge_base"]
