"""Model backends: what the rules ask of a model, and who answers.

A backend answers the questions of the rules: read a chunk (in one answer: its rewrite, its
summary, and the sentences each default view should say), summarise a source, write a project's
abstract, put a table or figure into words, write a section of a view on request (statements
citing facts) and a spec (requirements citing statements), and say which of the statements that
code could not clear their closest source sentences do not support (the grounding check). `params(task)` and the backend's `code` go into the fingerprint of the rule that asks, so
that switching backend or model, or changing the backend's code, makes exactly those pages stale.
"""
from __future__ import annotations

from .backend import Backend
from .choice import choose_backend
from .offline import OfflineBackend
from .settings import ModelSettings

__all__ = ["Backend", "ModelSettings", "OfflineBackend", "choose_backend"]
