"""One build's model calls in batch mode: answered from a collected batch, or deferred to the next.

The OpenAI backend asks `BatchCalls.completion` instead of the server when a build runs with
`--batch`. A request a collected batch answered is answered here (the backend then validates it
and the engine caches it under the same key as an online answer, so no request is ever paid
twice); a request a batch refused fails its query with the server's reason; any other is deferred
(the engine's CallDeferred: its query waits) and joins the next batch, unless a batch still
running holds it already. `kbuild/model/batches.py` talks to the batch service.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletion

from ..engine import CallDeferred


class BatchRefused(Exception):
    """The server refused this request inside a batch (a 4xx other than a rate limit): asking
    again would be refused again, so the query fails with the server's reason."""


@dataclass
class BatchCalls:
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom id -> chat.completion body
    refusals: dict[str, str] = field(default_factory=dict)  # custom id -> the server's reason
    running: set[str] = field(default_factory=set)  # custom ids in batches not finished yet
    to_submit: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom id -> request body, this build's
    still_running: set[str] = field(default_factory=set)  # of `running`, those this build needed
    used: set[str] = field(default_factory=set)  # answers this build took

    def completion(self, custom_id: str, body: dict[str, Any]) -> ChatCompletion:
        """The batch's answer to `body`, or CallDeferred (the query waits for a later build)."""
        answer = self.answers.get(custom_id)
        if answer is not None:
            self.used.add(custom_id)
            return ChatCompletion.model_validate(answer)
        if custom_id in self.refusals:
            raise BatchRefused(self.refusals[custom_id])
        if custom_id in self.running:
            self.still_running.add(custom_id)
            raise CallDeferred("its model call is in a batch that has not finished")
        self.to_submit[custom_id] = body
        raise CallDeferred("its model call goes into the next batch")
