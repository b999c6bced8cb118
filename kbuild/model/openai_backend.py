"""Any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, llama.cpp's server, Ollama).

Every call goes through the engine's call cache, keyed by the whole request (base URL, model,
messages, parameters, output schema), so the same prompt is never paid for twice. Replies are
structured: the task's pydantic schema goes out as a `json_schema` response format, or, for a
server that refuses it, as JSON mode with the schema in the prompt (said once). A reply that does
not validate is asked again with the validation error; only valid replies are cached.

Retries of 429 (honouring Retry-After), 5xx, timeouts and dropped connections, with exponential
backoff and jitter, are the openai client's own (`max_retries`); a body that is not JSON is
retried here. Calls in flight are bounded by the engine (`max_calls`); requests and tokens per
minute by aiolimiter.
"""
from __future__ import annotations

import base64
import json
import math
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import openai
from aiolimiter import AsyncLimiter
from pydantic import BaseModel, ValidationError

from ..engine import Problem
from .calllog import CallLog
from .settings import ModelSettings

MALFORMED_BODY_RETRIES = 2


TEMPLATES = {"rewrite": "rewrite.md", "chunk summary": "chunk-summary.md", "source summary": "source-summary.md",
             "abstract": "abstract.md", "figure": "figure.md", "view": "view.md", "spec": "spec.md",
             "grounding": "ground.md"}


class Rewrite(BaseModel):
    text: str


class ChunkSummary(BaseModel):
    summary: str


class SourceSummary(BaseModel):
    summary: str


class Abstract(BaseModel):
    abstract: str


class FigureText(BaseModel):
    text: str


class Statement(BaseModel):
    text: str
    cites: list[int]


class Section(BaseModel):
    statements: list[Statement]


class Requirement(BaseModel):
    statement: str
    acceptance: str
    cites: list[int]


class Spec(BaseModel):
    requirements: list[Requirement]


class Grounding(BaseModel):
    unsupported: list[str]


def prompt_path(name: str) -> Path:
    import kbuild.rules

    return Path(kbuild.rules.__file__).parent / "prompts" / name


def untrusted(text: str) -> str:
    """Source text goes inside <source> tags; a closing tag inside it must not end them."""
    return text.replace("</source>", "</ source>")


class OpenAIBackend:
    name = "openai"

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self.label = f"written by {settings.model} (model output, checked against its sources)"
        self.mode = "json_schema"  # until the server refuses it
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: object = None
        self._requests = AsyncLimiter(settings.requests_per_minute, 60) if settings.requests_per_minute else None
        self._tokens = AsyncLimiter(settings.tokens_per_minute, 60) if settings.tokens_per_minute else None
        self.notices: list[str] = []

    # -- what goes into fingerprints -------------------------------------------------------

    def params(self, task: str) -> dict[str, object]:
        s = self.settings
        return {"backend": self.name, "base_url": s.base_url or "", "model": s.model_for(task),
                "temperature": s.temperature, "max_tokens": s.max_tokens, "task": task}

    @property
    def code(self) -> tuple[object, ...]:
        import sys

        return (sys.modules[__name__],)

    def prompts(self, task: str) -> list[Path]:
        return [prompt_path("system.md"), prompt_path(TEMPLATES[task])]

    # -- the questions the rules ask ---------------------------------------------------------

    async def rewrite(self, ctx: Any, span: str, headings: list[str], title: str,
                      figures: dict[str, str], previous: str, check: Callable[[str], list[str]] | None = None) -> str:
        figure_text = "\n\n".join(f"{name}:\n{text}" for name, text in figures.items()) or "(none)"
        reply = await self.ask(ctx, "rewrite", "rewrite.md", Rewrite, check=(lambda r: check(r.text)) if check else None,
                               title=title,
                               where=" › ".join([title, *headings]), previous=untrusted(previous) or "(none)",
                               figures=untrusted(figure_text), chunk=untrusted(span))
        return reply.text

    async def summarise_chunk(self, ctx: Any, span: str, headings: list[str], previous: str) -> str:
        reply = await self.ask(ctx, "chunk summary", "chunk-summary.md", ChunkSummary, title=headings[0] if headings else "",
                               where=" › ".join(headings) or "its opening", previous=untrusted(previous) or "(none)",
                               chunk=untrusted(span))
        return reply.summary

    async def summarise_source(self, ctx: Any, title: str, summaries: list[str]) -> str:
        reply = await self.ask(ctx, "source summary", "source-summary.md", SourceSummary, title=title,
                               summaries=untrusted("\n".join(f"- {s}" for s in summaries)))
        return reply.summary

    async def abstract(self, ctx: Any, title: str, summaries: list[str]) -> str:
        reply = await self.ask(ctx, "abstract", "abstract.md", Abstract, title=title,
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
        return (await self.structured(ctx, "figure", messages, FigureText)).text

    async def write_section(self, ctx: Any, kind: str, about: str, title: str, facts: list[dict[str, Any]],
                            check: Callable[[list[dict[str, Any]]], list[str]]) -> list[dict[str, Any]]:
        """Statements for one section of a view; the model cites facts by number, code maps them
        and checks them (`check`), and a reply that fails is asked again with the failures."""
        if not facts:
            return []
        numbered = "\n\n".join(f"[{n}] " + " ".join(f["sentences"]) for n, f in enumerate(facts, start=1))
        refs = {n: f["ref"] for n, f in enumerate(facts, start=1)}

        def statements(reply: Section) -> list[dict[str, Any]]:
            return [{"text": st.text, "cites": [refs[c] for c in st.cites if c in refs]} for st in reply.statements]

        reply = await self.ask(ctx, "view", "view.md", Section, check=lambda r: check(statements(r)), kind=kind,
                               about=about, title=title, facts=untrusted(numbered))
        return statements(reply)

    async def write_spec(self, ctx: Any, name: str, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not statements:
            return []
        numbered = "\n".join(f"[{n}] {st['text']}" for n, st in enumerate(statements, start=1))
        reply = await self.ask(ctx, "spec", "spec.md", Spec, name=name, statements=untrusted(numbered))
        cites = {n: st["cites"] for n, st in enumerate(statements, start=1)}
        return [{"statement": r.statement, "acceptance": r.acceptance,
                 "cites": [ref for c in r.cites if c in cites for ref in cites[c]]} for r in reply.requirements]

    async def ground(self, ctx: Any, page: str, sources: list[str]) -> list[str]:
        """The statements of a page that its sources do not support, by one model call that reads
        only the page and what it links to."""
        reply = await self.ask(ctx, "grounding", "ground.md", Grounding, page=untrusted(page),
                               sources=untrusted("\n\n---\n\n".join(sources)))
        return reply.unsupported

    # -- one structured call, cached -------------------------------------------------------

    async def ask(self, ctx: Any, task: str, template: str, schema: type[BaseModel],
                  check: Callable[[Any], list[str]] | None = None, **fields: str) -> Any:
        system = prompt_path("system.md").read_text()
        user = prompt_path(template).read_text().format(**fields)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return await self.structured(ctx, task, messages, schema, check)

    async def structured(self, ctx: Any, task: str, messages: list[dict[str, Any]], schema: type[BaseModel],
                         check: Callable[[Any], list[str]] | None = None) -> Any:
        """A reply that fits `schema` and passes `check` (a code guardrail: a list of failures).

        A reply that does not is asked again with what was wrong, `validation_retries` times;
        only a reply that passes is cached."""
        model = self.settings.model_for(task)
        last_error = ""
        for attempt in range(self.settings.validation_retries + 1):
            asked = messages if not last_error else [*messages, {
                "role": "user",
                "content": f"Your reply did not fit the schema or failed a check: {last_error}. Reply again with only the JSON object."}]
            request = {"backend": self.name, "base_url": self.settings.base_url or "", "model": model,
                       "messages": asked, "temperature": self.settings.temperature,
                       "max_tokens": self.settings.max_tokens, "schema": schema.model_json_schema()}
            try:
                response = await self._cached(ctx, task, request, schema, check)
            except _Invalid as exc:
                last_error = exc.reason
                continue
            return schema.model_validate(response["content"])
        raise Problem(f"{ctx.query_id}: the model's reply did not fit the {task} schema or failed its checks after "
                      f"{self.settings.validation_retries + 1} tries ({last_error})")

    async def _cached(self, ctx: Any, task: str, request: dict[str, Any], schema: type[BaseModel],
                      check: Callable[[Any], list[str]] | None) -> Any:
        computed = {}

        async def compute() -> dict[str, Any]:
            computed["yes"] = True
            return await self._send(ctx, task, request, schema, check)

        started = time.perf_counter()
        response = await ctx.call(request, compute)
        if not computed:
            self._log(ctx).record(task=task, query=ctx.query_id, model=request["model"], request=request,
                                  response=response, cache_hit=True, latency=time.perf_counter() - started)
        return response

    async def _send(self, ctx: Any, task: str, request: dict[str, Any], schema: type[BaseModel],
                    check: Callable[[Any], list[str]] | None) -> dict[str, Any]:
        """One call to the server, then validation: only a valid reply leaves here (to the cache)."""
        s = self.settings
        kwargs: dict[str, Any] = {"model": request["model"], "messages": request["messages"],
                                  "temperature": s.temperature, "max_tokens": s.max_tokens}
        estimate = sum(len(json.dumps(m["content"])) for m in request["messages"]) // 4 + s.max_tokens
        if self._requests:
            await self._requests.acquire()
        if self._tokens:
            await self._tokens.acquire(min(estimate, s.tokens_per_minute or estimate))
        started = time.perf_counter()
        completion = await self._create(ctx, kwargs, schema)
        latency = time.perf_counter() - started
        content = (completion.choices[0].message.content or "") if completion.choices else ""
        usage = completion.usage
        tokens_in = usage.prompt_tokens if usage else 0
        tokens_out = usage.completion_tokens if usage else 0
        cost = s.cost(request["model"], tokens_in, tokens_out)
        ctx.count("model calls", 1)
        ctx.count("tokens in", tokens_in)
        ctx.count("tokens out", tokens_out)
        ctx.count("cost USD", cost)
        log = self._log(ctx)
        try:
            parsed = schema.model_validate_json(content)
            failures = check(parsed) if check else []
            if failures:
                raise _Invalid("; ".join(failures))
        except (ValidationError, _Invalid) as exc:
            reason = exc.reason if isinstance(exc, _Invalid) else "an empty reply" if not content.strip() else _short(exc)
            log.record(task=task, query=ctx.query_id, model=request["model"], request=request, response=content,
                       cache_hit=False, latency=latency, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost,
                       error=reason)
            raise _Invalid(reason) from None
        response = {"content": parsed.model_dump(mode="json"), "mode": self.mode,
                    "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}}
        log.record(task=task, query=ctx.query_id, model=request["model"], request=request, response=content,
                   cache_hit=False, latency=latency, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
        return response

    async def _create(self, ctx: Any, kwargs: dict[str, Any], schema: type[BaseModel]) -> Any:
        client = self.client()
        for attempt in range(MALFORMED_BODY_RETRIES + 1):
            used = self.mode
            if used == "json_schema":
                fmt = {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": _strict(schema),
                                                              "strict": True}}
                messages = kwargs["messages"]
            else:
                fmt = {"type": "json_object"}
                schema_text = json.dumps(schema.model_json_schema())
                messages = [*kwargs["messages"], {"role": "system", "content": f"The JSON schema: {schema_text}"}]
            try:
                return await client.chat.completions.create(**{**kwargs, "messages": messages}, response_format=fmt)
            except openai.BadRequestError as exc:
                refused_format = "response_format" in str(exc).lower() or "json_schema" in str(exc).lower()
                if used == "json_schema" and refused_format:
                    if self.mode == "json_schema":  # the first call to hear it says so; the others just retry
                        self.mode = "json_object"
                        ctx.warn(f"{self.settings.base_url or 'the server'} refused json_schema response formats; "
                                 "using JSON mode with the schema in the prompt")
                    continue
                raise Problem(f"{ctx.query_id}: the model server refused the request: {_api_message(exc)}") from None
            except openai.APITimeoutError:
                raise Problem(f"{ctx.query_id}: the model server did not answer within {self.settings.timeout:.0f} s, "
                              f"{self.settings.max_retries + 1} times; try again later or raise `timeout`") from None
            except openai.APIConnectionError as exc:
                raise Problem(f"{ctx.query_id}: cannot reach the model server at {self.settings.base_url or 'api.openai.com'} "
                              f"({exc.__cause__ or exc}); is it running?") from None
            except openai.RateLimitError as exc:
                raise Problem(f"{ctx.query_id}: the model server kept refusing for rate limits after "
                              f"{self.settings.max_retries + 1} tries ({_api_message(exc)}); try again later or "
                              "lower `requests_per_minute`") from None
            except openai.APIStatusError as exc:
                raise Problem(f"{ctx.query_id}: the model server failed with {exc.status_code} after "
                              f"{self.settings.max_retries + 1} tries: {_api_message(exc)}") from None
            except (json.JSONDecodeError, ValueError) as exc:
                if attempt == MALFORMED_BODY_RETRIES:
                    raise Problem(f"{ctx.query_id}: the model server's reply was not valid JSON "
                                  f"{attempt + 1} times ({exc})") from None
        raise AssertionError("unreachable")

    # -- yes/no with a probability -----------------------------------------------------------

    async def yes_probability(self, ctx: Any, task: str, question: str, context: str) -> tuple[float, bool]:
        """The probability the model answers "yes", from logprobs when the server returns them.

        Returns (probability, from_logprobs). Without logprobs the answer itself gives 1.0 or
        0.0, and from_logprobs is False, so a caller can treat it as less certain.
        """
        model = self.settings.model_for(task)
        messages = [{"role": "system", "content": prompt_path("system.md").read_text().rsplit("\n\nReply", 1)[0]
                     + "\n\nAnswer with one word: yes or no."},
                    {"role": "user", "content": f"<source>\n{untrusted(context)}\n</source>\n\n{question}"}]
        request = {"backend": self.name, "base_url": self.settings.base_url or "", "model": model,
                   "messages": messages, "logprobs": True, "top_logprobs": 5, "max_tokens": 1}

        async def compute() -> dict[str, Any]:
            completion = await self.client().chat.completions.create(
                model=model, messages=messages, max_tokens=1, temperature=0, logprobs=True, top_logprobs=5)
            choice = completion.choices[0]
            tops: dict[str, float] = {}
            if choice.logprobs and choice.logprobs.content:
                for top in choice.logprobs.content[0].top_logprobs:
                    word = top.token.strip().lower()
                    tops[word] = max(tops.get(word, -math.inf), top.logprob)
            return {"answer": (choice.message.content or "").strip().lower(), "top": tops}

        response = await ctx.call(request, compute)
        top = response["top"]
        if "yes" in top or "no" in top:
            yes, no = math.exp(top.get("yes", -math.inf)), math.exp(top.get("no", -math.inf))
            return yes / (yes + no), True
        return (1.0 if response["answer"].startswith("yes") else 0.0), False

    # -- plumbing ----------------------------------------------------------------------------

    def client(self) -> openai.AsyncOpenAI:
        import asyncio

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # one client per event loop (per build)
            s = self.settings
            self._client = openai.AsyncOpenAI(api_key=s.api_key or "not-needed", base_url=s.base_url,
                                              timeout=s.timeout, max_retries=s.max_retries)
            self._client_loop = loop
        return self._client

    def _log(self, ctx: Any) -> CallLog:
        return CallLog.for_root(ctx.state_dir)


class _Invalid(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _short(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the reply"
    return f"{where}: {first['msg']}"


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(error.get("message") or exc.message)


def _strict(schema: type[BaseModel]) -> dict[str, Any]:
    """OpenAI's strict mode wants every property required and no others allowed."""
    doc = schema.model_json_schema()
    doc["additionalProperties"] = False
    doc["required"] = list(doc.get("properties", {}))
    return doc
