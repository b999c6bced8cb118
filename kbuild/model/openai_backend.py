"""Any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, llama.cpp's server, Ollama).

Every call goes through the engine's call cache, keyed by the whole request (base URL, model,
messages, parameters, output schema), so the same prompt is never paid for twice. Replies are
structured: the task's pydantic schema goes out as a `json_schema` response format, or, for a
server that refuses it, as JSON mode with the schema in the prompt (said once). A reply that does
not validate is asked again with the validation error; only valid replies are cached.

This module decides the replies, and its source is in the fingerprint of every rule that asks
(`code`). How a call travels (the client, rate limits, the server's failures, batches) is
transport.py, outside every fingerprint. Retries of 429 (honouring Retry-After), 5xx, timeouts
and dropped connections, with exponential backoff and jitter, are the openai client's own
(`max_retries`); calls in flight are bounded by the engine (`max_calls`).
"""
from __future__ import annotations

import base64
import functools
import json
import math
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import openai
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, Field, ValidationError, create_model

from ..engine import CallCache, Problem
from ..text import obligations
from ..text.tokens import estimate_tokens
from .backend import Backend
from .batchcalls import BatchCalls
from .calllog import CallLog
from .settings import ModelSettings
from .transport import FormatRefused, Transport, api_message

if TYPE_CHECKING:
    from ..checks.grounding import Doubt

BATCH_PRICE = 0.5  # OpenAI's batch service charges half the online price


TEMPLATES = {"reading": "read.md", "source summary": "source-summary.md", "abstract": "abstract.md",
             "figure": "figure.md", "view": "view.md", "spec": "spec.md", "grounding": "ground.md",
             "disagreement": "disagree.md", "concept": "concept.md"}
EXAMPLES = {"reading": "read.example.json"}  # a worked example, sent as an earlier turn
SUMMARY_CHARS = 600  # a summary is one or two sentences
QUOTE_CHARS = 300  # a sentence picked for a view, quoted
STATEMENT_CHARS = 400
SYNTHESIS_SENTENCES = 3  # a concept page's opening: what its sources say together, not each again
# what obliges in a view's statements, as the spec prompt names it (kbuild.text.obligations)
CAPITAL_KEYWORDS = ("an RFC 2119 keyword in capitals (MUST, MUST NOT, SHALL, SHALL NOT, SHOULD, SHOULD NOT, MAY, "
                    "REQUIRED, RECOMMENDED, OPTIONAL)")
PLAIN_KEYWORDS = ("must, must not, shall, shall not, should or should not in lower case, used to oblige: these statements "
                  "write no RFC 2119 keyword in capitals, so they state their rules in plain English (\"may\" is no "
                  "keyword here, nor is \"it should be noted\", nor what an attacker must do)")
REASONING_CHARS = 400  # the judge's reasoning before its verdict on a disagreement: a sentence or two


class SourceSummary(BaseModel):
    summary: Annotated[str, Field(max_length=SUMMARY_CHARS * 2)]


class Abstract(BaseModel):
    abstract: Annotated[str, Field(max_length=SUMMARY_CHARS * 2)]


class FigureText(BaseModel):
    text: str


class Statement(BaseModel):
    text: Annotated[str, Field(max_length=STATEMENT_CHARS)]
    cites: Annotated[list[int], Field(max_length=8)]


class Section(BaseModel):
    statements: Annotated[list[Statement], Field(max_length=12)]


class Synthesis(BaseModel):
    statements: Annotated[list[Statement], Field(max_length=SYNTHESIS_SENTENCES)]


class Requirement(BaseModel):
    statement: Annotated[str, Field(max_length=STATEMENT_CHARS)]
    acceptance: Annotated[str, Field(max_length=STATEMENT_CHARS)]
    cites: Annotated[list[int], Field(max_length=8)]


class Spec(BaseModel):
    requirements: Annotated[list[Requirement], Field(max_length=40)]


class Grounding(BaseModel):
    unsupported: list[int]


class DisagreementVerdict(BaseModel):
    """The judge's reply on one candidate disagreement: its reasoning first, then the verdict
    (a small model judges far better when it reasons before it decides)."""

    reasoning: Annotated[str, Field(max_length=REASONING_CHARS)]
    verdict: Literal["disagree", "agree"]


@functools.lru_cache(maxsize=None)
def reading_schema(views: tuple[str, ...], picks: int) -> type[BaseModel]:
    """The one reply per chunk: its rewrite, its summary, and its sentences for each default view."""
    quotes = Annotated[list[Annotated[str, Field(max_length=QUOTE_CHARS)]], Field(max_length=picks)]
    fields: dict[str, Any] = {"rewrite": (str, ...), "summary": (Annotated[str, Field(max_length=SUMMARY_CHARS)], ...)}
    fields.update({view: (quotes, ...) for view in views})
    return create_model("ChunkReading", **fields)


DATA_MARK = "<!-- data"
EVIDENCE_CHARS = 500  # a source sentence shown to the grounding model (a code block is one "sentence")


def split_template(template: str) -> tuple[str, str]:
    """A prompt template's task (sent once, in the system message) and its data (sent with each
    question; a worked example repeats only this part)."""
    if DATA_MARK not in template:
        return "", template
    task, _, rest = template.partition(DATA_MARK)
    return task.strip(), rest.split("-->", 1)[1].lstrip("\n")


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " …"


PROMPTS = Path(__file__).parent / "prompts"  # the templates this backend fills in, shipped with it


def prompt_path(name: str) -> Path:
    return PROMPTS / name


def untrusted(text: str) -> str:
    """Source text goes inside <source> tags; a closing tag inside it must not end them."""
    return text.replace("</source>", "</ source>")


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, settings: ModelSettings) -> None:
        self.settings: ModelSettings = settings
        self.label = f"written by {settings.model} (model output, checked against its sources)"
        self.mode = first_mode(settings.base_url)  # until the server refuses it
        self.transport = Transport(settings)
        self._judge_off = False
        # batch mode (`kbuild build --batch`): calls are answered from collected batches or
        # deferred to the next one; how calls travel, not what they ask, so no fingerprint changes
        self.batch: BatchCalls | None = None

    # -- what goes into fingerprints -------------------------------------------------------

    def params(self, task: str) -> dict[str, object]:
        s = self.settings
        return {"backend": self.name, "base_url": s.base_url or "", "model": s.model_for(task),
                "temperature": s.temperature, "max_tokens": s.max_tokens, "task": task}

    @property
    def code(self) -> tuple[object, ...]:
        """What decides this backend's replies: this module, not its transport."""
        return (sys.modules[__name__],)

    def prompts(self, task: str) -> list[Path]:
        return [prompt_path("system.md"), prompt_path(TEMPLATES[task]),
                *([prompt_path(EXAMPLES[task])] if task in EXAMPLES else [])]

    # -- the questions the rules ask ---------------------------------------------------------

    async def read_chunk(self, ctx: Any, span: str, headings: list[str], title: str, figures: dict[str, str],
                         previous: str, views: dict[str, str], picks: int,
                         check: Callable[[dict[str, str]], list[str]] | None = None) -> dict[str, Any]:
        """One call per chunk: its rewrite, its summary and, for each view (name: purpose), the
        chunk's sentences that belong in it, quoted. `check` is the code guardrail of the rewrite
        and summary. String lengths bound the reply both ways where the server takes them: a
        small model can neither run away inside a string nor answer with nothing."""
        figure_text = "\n\n".join(f"{name}:\n{text}" for name, text in figures.items()) or "(none)"
        schema = reading_schema(tuple(views), picks)
        listed = "; ".join(f'"{view}" ({purpose.lower()})' for view, purpose in views.items()) or "none"
        quote = {"type": "array", "maxItems": picks,
                 "items": {"type": "string", "minLength": 12, "maxLength": QUOTE_CHARS}}
        shape = {"rewrite": {"minLength": min(len(span) // 2, 400), "maxLength": 2 * len(span) + 600},
                 "summary": {"minLength": min(len(span) // 4, 40), "maxLength": SUMMARY_CHARS},
                 **{view: quote for view in views}}
        worked = json.loads(prompt_path(EXAMPLES["reading"]).read_text())
        answered = {"rewrite": worked["reply"]["rewrite"], "summary": worked["reply"]["summary"],
                    **{view: worked["reply"]["picks"] for view in views}}
        reply = await self.ask(
            ctx, "reading", schema, example=(worked["fields"], answered),
            check=(lambda r: check({"rewrite": r.rewrite, "summary": r.summary})) if check else None, shape=shape,
            # what the reply should take (the rewrite a little longer than the part, a summary, the
            # picks no longer than the part), not what it may take: a model that loops is cut early
            max_tokens=estimate_tokens(span) * 4 + 200,
            title=title, where=" › ".join([title, *headings]), previous=untrusted(previous) or "(none)",
            figures=untrusted(figure_text), chunk=untrusted(span), views=listed, picks=str(picks))
        return {"rewrite": reply.rewrite, "summary": reply.summary,
                "picks": {view: list(getattr(reply, view)) for view in views}}

    async def summarise_source(self, ctx: Any, title: str, summaries: list[str],
                               check: Callable[[str], list[str]] | None = None) -> str:
        reply = await self.ask(ctx, "source summary", SourceSummary, max_tokens=SUMMARY_CHARS, title=title,
                               check=(lambda r: check(r.summary)) if check else None,
                               summaries=untrusted("\n".join(f"- {s}" for s in summaries)))
        return reply.summary

    async def abstract(self, ctx: Any, title: str, summaries: list[str],
                       check: Callable[[str], list[str]] | None = None) -> str:
        reply = await self.ask(ctx, "abstract", Abstract, max_tokens=SUMMARY_CHARS, title=title,
                               check=(lambda r: check(r.abstract)) if check else None,
                               summaries=untrusted("\n".join(f"- {s}" for s in summaries)))
        return reply.abstract

    async def describe_figure(self, ctx: Any, png: bytes, nearby: str, name: str, title: str) -> str:
        """A table or figure cut from a page, in words, by a model that reads images.

        Without `vision` the converter's text stands (no call).
        """
        if not self.settings.vision:
            return nearby
        system = prompt_path("system.md").read_text()
        user = prompt_path("figure.md").read_text().format(name=name, title=title, nearby=untrusted(nearby) or "(none)")
        image = "data:image/png;base64," + base64.b64encode(png).decode()
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": [{"type": "text", "text": user}, {"type": "image_url", "image_url": {"url": image}}]},
        ]
        reply = await self.structured(ctx, "figure", messages, FigureText, max_tokens=1500)
        return reply.text

    async def write_section(self, ctx: Any, kind: str, about: str, title: str, facts: list[dict[str, Any]],
                            check: Callable[[list[dict[str, Any]]], list[str]]) -> list[dict[str, Any]]:
        """Statements for one section of a view on request; the model cites facts by number, code
        maps them and checks them (`check`), and a reply that fails is asked again with the failures."""
        if not facts:
            return []
        numbered = "\n\n".join(f"[{n}] " + " ".join(f["sentences"]) for n, f in enumerate(facts, start=1))
        refs = {n: f["ref"] for n, f in enumerate(facts, start=1)}
        reply = await self.ask(ctx, "view", Section, check=lambda r: check(cited(r, refs)),
                               max_tokens=150 * min(len(facts), 12) + 100,
                               kind=kind, about=about, title=title, facts=untrusted(numbered))
        return cited(reply, refs)

    async def write_synthesis(self, ctx: Any, concept: str, facts: list[dict[str, Any]],
                              check: Callable[[list[dict[str, Any]]], list[str]]) -> list[dict[str, Any]]:
        """What the sources together say of a concept, in at most SYNTHESIS_SENTENCES sentences;
        the model cites facts by number, each shown with its source's title."""
        if not facts:
            return []
        numbered = "\n".join(f"[{n}] ({f['title']}) " + " ".join(f["sentences"]) for n, f in enumerate(facts, start=1))
        refs = {n: f["ref"] for n, f in enumerate(facts, start=1)}
        reply = await self.ask(ctx, "concept", Synthesis, check=lambda r: check(cited(r, refs)),
                               max_tokens=150 * SYNTHESIS_SENTENCES + 100, concept=concept, facts=untrusted(numbered))
        return cited(reply, refs)

    async def write_spec(self, ctx: Any, name: str, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not statements:
            return []
        numbered = "\n".join(f"[{n}] {st['text']}" for n, st in enumerate(statements, start=1))
        plain = obligations.plain_obligations([st["text"] for st in statements])
        reply = await self.ask(ctx, "spec", Spec, max_tokens=250 * min(len(statements), 40) + 100, name=name,
                               keywords=PLAIN_KEYWORDS if plain else CAPITAL_KEYWORDS, statements=untrusted(numbered))
        cites = {n: st["cites"] for n, st in enumerate(statements, start=1)}
        return [{"statement": r.statement, "acceptance": r.acceptance,
                 "cites": [ref for c in r.cites if c in cites for ref in cites[c]]} for r in reply.requirements]

    async def ground(self, ctx: Any, doubts: Sequence[Doubt]) -> list[int]:
        """Which of the statements code could not clear their closest source sentences do not
        support: their indices. The reply can only name a statement it was asked about: the
        schema allows its numbers and no others."""
        if not doubts:
            return []
        labels: dict[str, str] = {}  # each source sentence once per question, however many doubts it is close to
        for d in doubts:
            for e in d.evidence:
                labels.setdefault(e, f"S{len(labels) + 1}")
        listed = "\n".join(f"[{label}] {_cut(e, EVIDENCE_CHARS)}" for e, label in labels.items()) or "(none)"
        numbered = "\n".join(f"[{n}] {d.sentence} (closest: {', '.join(labels[e] for e in d.evidence) or 'none'})"
                              for n, d in enumerate(doubts, start=1))
        allowed = list(range(1, len(doubts) + 1))

        def in_range(reply: Grounding) -> list[str]:
            return [f"{n} is not the number of a statement" for n in reply.unsupported if n not in allowed]

        reply = await self.ask(ctx, "grounding", Grounding, check=in_range,
                               shape={"unsupported": {"maxItems": len(doubts),
                                                      "items": {"type": "integer", "enum": allowed}}},
                               max_tokens=16 + 6 * len(doubts), sources=untrusted(listed),
                               statements=untrusted(numbered))
        return sorted({n - 1 for n in reply.unsupported})

    async def judge_disagreement(self, ctx: Any, first: str, second: str, attribute: str, values: str) -> bool:
        """Whether two statements that code found to give one attribute two values truly disagree:
        the model reasons first, then answers."""
        reply = await self.ask(ctx, "disagreement", DisagreementVerdict, max_tokens=REASONING_CHARS // 2 + 32,
                               attribute=attribute, values=values, first=untrusted(first), second=untrusted(second))
        return reply.verdict == "disagree"

    # -- one structured call, cached -------------------------------------------------------

    async def ask(self, ctx: Any, task: str, schema: type[BaseModel], check: Callable[[Any], list[str]] | None = None,
                  shape: dict[str, dict[str, Any]] | None = None, max_tokens: int = 1024,
                  example: tuple[dict[str, str], dict[str, Any]] | None = None, **fields: str) -> Any:
        """One structured question from its template; `example` (fields, reply) goes first as an
        earlier turn of the conversation, answered."""
        task_text, data = split_template(prompt_path(TEMPLATES[task]).read_text())
        system = prompt_path("system.md").read_text() + (f"\n\n{task_text.format(**fields)}" if task_text else "")
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if example is not None:
            asked, answered = example
            messages += [{"role": "user", "content": data.format(**{**fields, **asked})},
                         {"role": "assistant", "content": json.dumps(answered, ensure_ascii=False)}]
        messages.append({"role": "user", "content": data.format(**fields)})
        return await self.structured(ctx, task, messages, schema, check, shape or {}, max_tokens)

    async def structured(self, ctx: Any, task: str, messages: list[dict[str, Any]], schema: type[BaseModel],
                         check: Callable[[Any], list[str]] | None = None, shape: dict[str, dict[str, Any]] | None = None,
                         max_tokens: int = 1024) -> Any:
        """A reply that fits `schema` and passes `check` (a code guardrail: a list of failures).

        A reply that does not is asked again with what was wrong, `validation_retries` times;
        only a reply that passes is cached. `max_tokens` is sized by the caller from the task's
        input; the settings' `max_tokens`, when set, caps it."""
        model = self.settings.model_for(task)
        limit = min(max_tokens, self.settings.max_tokens) if self.settings.max_tokens else max_tokens
        last_error = ""
        for attempt in range(self.settings.validation_retries + 1):
            asked = messages if not last_error else [*messages, {
                "role": "user",
                "content": f"Your reply did not fit the schema or failed a check: {last_error}. Reply again with only the JSON object."}]
            call = _Call(task=task, model=model, messages=asked, schema=schema, shape=shape or {}, max_tokens=limit,
                         temperature=self.settings.temperature)
            try:
                response = await self._cached(ctx, call, check)
            except _Invalid as exc:
                last_error = exc.reason
                continue
            return schema.model_validate(response["content"])
        raise Problem(f"{ctx.query_id}: the model's reply did not fit the {task} schema or failed its checks after "
                      f"{self.settings.validation_retries + 1} tries ({last_error})")

    async def _cached(self, ctx: Any, call: _Call, check: Callable[[Any], list[str]] | None) -> Any:
        computed = {}

        # The cache key is what decides the reply: the call as first offered (a mode a server
        # refused later does not make a new call of the same question)
        key = {"backend": self.name, "base_url": self.settings.base_url or "", **call.body(self.mode)}

        async def compute() -> dict[str, Any]:
            computed["yes"] = True
            return await self._send(ctx, call, check, CallCache.key(key))

        started = time.perf_counter()
        response = await ctx.call(key, compute)
        if not computed:
            self._log(ctx).record(task=call.task, query=ctx.query_id, model=call.model, request=response.get("sent", key),
                                  response=response["content"], cache_hit=True, latency=time.perf_counter() - started)
        return response

    async def _send(self, ctx: Any, call: _Call, check: Callable[[Any], list[str]] | None,
                    custom_id: str) -> dict[str, Any]:
        """One call to the server (or its answer from a batch, `custom_id` naming it there), then
        validation: only a valid reply leaves here (to the cache)."""
        s = self.settings
        started = time.perf_counter()
        if self.batch is not None:
            sent = call.body(self.mode)
            completion = self.transport.from_batch(ctx.query_id, self.batch, custom_id, sent)
        else:
            completion, sent = await self._create(ctx, call)
        latency = time.perf_counter() - started
        content = (completion.choices[0].message.content or "") if completion.choices else ""
        usage = completion.usage
        tokens_in = usage.prompt_tokens if usage else 0
        tokens_out = usage.completion_tokens if usage else 0
        cost = s.cost(call.model, tokens_in, tokens_out)
        if cost is not None and self.batch is not None:
            cost *= BATCH_PRICE
        ctx.count("model calls", 1)
        ctx.count("tokens in", tokens_in)
        ctx.count("tokens out", tokens_out)
        if cost is None:
            ctx.count("calls without a price", 1)
        else:
            ctx.count("cost USD", cost)
        log = self._log(ctx)
        try:
            parsed = call.schema.model_validate_json(content)
            failures = check(parsed) if check else []
            if failures:
                raise _Invalid("; ".join(failures))
        except (ValidationError, _Invalid) as exc:
            reason = exc.reason if isinstance(exc, _Invalid) else "an empty reply" if not content.strip() else _short(exc)
            cut = completion.choices and completion.choices[0].finish_reason == "length"
            if cut:
                reason += f" (the reply was cut at max_tokens={call.max_tokens})"
            log.record(task=call.task, query=ctx.query_id, model=call.model, request=sent, response=content,
                       cache_hit=False, latency=latency, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost,
                       error=reason)
            raise _Invalid(reason) from None
        response = {"content": parsed.model_dump(mode="json"), "mode": sent.get("response_format", {}).get("type"),
                    "sent": sent, "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}}
        log.record(task=call.task, query=ctx.query_id, model=call.model, request=sent, response=content,
                   cache_hit=False, latency=latency, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
        return response

    async def _create(self, ctx: Any, call: _Call) -> tuple[Any, dict[str, Any]]:
        """The completion, and the request body exactly as it was sent: in the first mode the
        server takes, from the most it must accept (MODES)."""
        while True:
            used = self.mode
            body = call.body(used)
            try:
                return await self.transport.create(ctx.query_id, body), body
            except FormatRefused as exc:
                if used == MODES[-1]:
                    raise Problem(f"{ctx.query_id}: the model server refused the request: {exc.message}") from None
                if self.mode == used:  # the first call to hear it says so; the others just retry
                    self.mode = MODES[MODES.index(used) + 1]
                    ctx.warn(f"{self.settings.base_url or 'the server'} refused {used} response formats "
                             f"({exc.message[:160]}); sending {self.mode} from now on")

    # -- yes/no with a probability -----------------------------------------------------------

    async def yes_probability(self, ctx: Any, task: str, question: str, context: str) -> tuple[float, bool]:
        """The probability the model answers "yes", from logprobs when the server returns them.

        Returns (probability, from_logprobs). Without logprobs the answer itself gives 1.0 or
        0.0, and from_logprobs is False: a caller must not take it as evidence. A server that
        refuses the question (logprobs not supported) turns the judge off for the build, said once.
        """
        model = self.settings.model_for(task)
        messages = [{"role": "system", "content": prompt_path("system.md").read_text().rsplit("\n\nReply", 1)[0]
                     + "\n\nAnswer with one word: yes or no."},
                    {"role": "user", "content": f"<source>\n{untrusted(context)}\n</source>\n\n{question}"}]
        request = {"backend": self.name, "base_url": self.settings.base_url or "", "model": model,
                   "messages": messages, "logprobs": True, "top_logprobs": 5, "max_tokens": 1}

        if self._judge_off:
            return 0.0, False

        async def compute() -> dict[str, Any]:
            body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
                    "top_logprobs": 5}
            if self.batch is not None:
                completion = self.transport.from_batch(ctx.query_id, self.batch, CallCache.key(request), body)
            else:
                completion = await self.transport.send(body)  # within the rate limits, as every call
            choice = completion.choices[0]
            tops: dict[str, float] = {}
            if choice.logprobs and choice.logprobs.content:
                for top in choice.logprobs.content[0].top_logprobs:
                    word = top.token.strip().lower()
                    tops[word] = max(tops.get(word, -math.inf), top.logprob)
            return {"answer": (choice.message.content or "").strip().lower(), "top": tops}

        try:
            response = await ctx.call(request, compute)
        except openai.OpenAIError as exc:  # no judge is no cutoff: the page is taken as changed
            if not self._judge_off:
                self._judge_off = True
                reason = api_message(exc) if isinstance(exc, openai.APIStatusError) else str(exc)
                ctx.warn(f"{self.settings.base_url or 'the server'} cannot judge meaning ({reason[:160]}); "
                         "the meaning judge is off for this build, and the code stages decide alone")
            return 0.0, False
        top = response["top"]
        if "yes" in top or "no" in top:
            yes, no = math.exp(top.get("yes", -math.inf)), math.exp(top.get("no", -math.inf))
            return yes / (yes + no), True
        return (1.0 if response["answer"].startswith("yes") else 0.0), False

    def _log(self, ctx: Any) -> CallLog:
        return CallLog.for_root(ctx.state_dir)


class _Call:
    """One structured question: what the body sent for it is made from, in any mode."""

    def __init__(self, task: str, model: str, messages: list[dict[str, Any]], schema: type[BaseModel],
                 shape: dict[str, dict[str, Any]], max_tokens: int, temperature: float) -> None:
        self.task, self.model, self.messages, self.schema = task, model, messages, schema
        self.shape, self.max_tokens, self.temperature = shape, max_tokens, temperature

    def body(self, mode: str) -> dict[str, Any]:
        """The request body for `mode`, as the openai client sends it."""
        schema = sent_schema(self.schema, mode, self.shape)
        if mode == "json_object":
            messages = [*self.messages, {"role": "system", "content": f"The JSON schema: {json.dumps(schema)}"}]
            fmt: dict[str, Any] = {"type": "json_object"}
        else:
            messages = self.messages
            fmt = {"type": "json_schema", "json_schema": {"name": self.schema.__name__, "schema": schema, "strict": True}}
        return {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "response_format": fmt}


class _Invalid(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def cited(reply: Section | Synthesis, refs: dict[int, str]) -> list[dict[str, Any]]:
    """A reply's statements with the facts they cite by number named by their refs (a number
    that names no fact is dropped: a statement left citing none is refused by its check)."""
    return [{"text": st.text, "cites": [refs[c] for c in st.cites if c in refs]} for st in reply.statements]


def _short(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the reply"
    return f"{where}: {first['msg']}"


# How a reply's shape is sent, from the most to the least the server must accept:
# "bounded": OpenAI's strict schema plus string lengths, which llama.cpp and vLLM turn into a
# grammar, so that a small model cannot run away inside a string until max_tokens;
# "strict": OpenAI's strict subset (every object closed, every property required; array bounds
# but no string lengths); "json_object": JSON mode, the schema in the prompt.
MODES = ("bounded", "strict", "json_object")
STRING_BOUNDS = ("maxLength", "minLength")


def first_mode(base_url: str | None) -> str:
    """OpenAI's own endpoints refuse string lengths; any other server is offered them first."""
    host = urllib.parse.urlsplit(base_url or "https://api.openai.com/v1").hostname or ""
    return "strict" if host.endswith(("openai.com", "openai.azure.com")) else "bounded"


def sent_schema(schema: type[BaseModel], mode: str, shape: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema as sent: the openai SDK's strict form of `schema`, with the per-call
    keywords of `shape` on its top-level properties, string lengths only where `mode` allows."""
    doc = to_strict_json_schema(schema)
    for name, keywords in shape.items():
        doc["properties"][name].update(keywords)
    _drop_keys(doc, ("title",))  # a title per property says nothing its name does not, at a cost per call
    if mode != "bounded":
        _drop_keys(doc, STRING_BOUNDS)
    return doc


def _drop_keys(node: Any, keys: Sequence[str]) -> None:
    """Drop schema keywords from a schema and its subschemas (never a property of that name)."""
    if not isinstance(node, dict):
        return
    for key in keys:
        node.pop(key, None)
    for sub in [*(node.get("properties") or {}).values(), *(node.get("$defs") or {}).values(),
                *(node.get("anyOf") or []), node.get("items")]:
        _drop_keys(sub, keys)
