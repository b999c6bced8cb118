"""How to reach a model: Kbuildfile.py first, then the environment, then the offline backend.

Settings only: which backend they choose is kbuild.model.choice's, and kbuild's own backends
register themselves in kbuild.model.builtin."""
from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MODEL = "gpt-4o-mini"


class ModelSettings(BaseModel):
    """What a Kbuildfile may set as `model_settings = ModelSettings(...)` or pass to knowledge_base().

    Unset fields come from the environment: OPENAI_API_KEY, OPENAI_BASE_URL, KBUILD_MODEL.
    """

    model_config = ConfigDict(extra="forbid")

    # the backend a plug-in registered under this name (`kbuild plugins` lists them); None: "openai"
    # when a key, a server or a model is named, else "offline"
    backend: str | None = None
    model: str | None = None  # one model for every task
    models: dict[str, str] = {}  # a model per task: "reading", "source summary", "abstract", "figure", "view", "spec", "grounding", "disagreement", "concept"
    base_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = Field(None, gt=0)  # a cap; each call is sized from its task's input
    # seconds the server may send nothing before a call fails: a streamed reply that keeps coming
    # is never cut off (OpenAI's own API answers in one body: there, the seconds for the whole reply)
    timeout: float = Field(120.0, gt=0)
    # 429 (honouring Retry-After), 5xx, refused or dropped connections; never a call that timed
    # out, which the server may still be answering
    max_retries: int = Field(4, ge=0)
    # requests sent to the server at once; None: as many as it serves (llama.cpp's slots, else
    # learned from how it queues, from 1 on a local server; OpenAI's API: `max_calls`)
    concurrency: int | None = Field(None, ge=1)
    validation_retries: int = Field(2, ge=0)  # a reply that does not fit the schema is asked again this often
    requests_per_minute: float | None = Field(None, gt=0)
    tokens_per_minute: float | None = Field(None, gt=0)
    prices: dict[str, tuple[float, float]] = {}  # model -> (USD per million input tokens, per million output)
    vision: bool = False  # the model reads images: tables and figures get their text from it

    def resolved(self) -> ModelSettings:
        return self.model_copy(update={
            "model": self._named_model() or DEFAULT_MODEL,
            "base_url": self.base_url or os.environ.get("OPENAI_BASE_URL"),
            "api_key": self.api_key or os.environ.get("OPENAI_API_KEY"),
        })

    def _named_model(self) -> str | None:
        return self.model or os.environ.get("KBUILD_MODEL")

    def model_for(self, task: str) -> str:
        return self.models.get(task) or self.model or DEFAULT_MODEL

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float | None:
        """USD, or None when `prices` does not name the model: unknown, not free."""
        if model not in self.prices:
            return None
        price_in, price_out = self.prices[model]
        return (tokens_in * price_in + tokens_out * price_out) / 1_000_000

    def asks_for_a_model(self) -> bool:
        """A key, a server or a model is named, here or in the environment. Not the key alone
        decides: it is a secret CI does not have, and which backend built the pages must not
        depend on it, or `kbuild check` without it reads every page as another backend's."""
        resolved = self.resolved()
        return bool(resolved.api_key or resolved.base_url or self._named_model() or self.models)

    @property
    def missing_key(self) -> str | None:
        """Why these (resolved) settings cannot call a model, or None: api.openai.com without a
        key would only answer 401, after every retry."""
        if self.api_key or self.base_url:
            return None
        return f"the model {self.model} needs OPENAI_API_KEY, which is not set: set it (or OPENAI_BASE_URL for a server)"
