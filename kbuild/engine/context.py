"""A rule's window on the build: every read through it is recorded with its hash."""
from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

from .buildstate import BuildState
from .files import PathEscapesRoot
from .hashing import ABSENT
from .report import QueryFailed
from .rule import Query, Rule
from .state import DepGroup, FileRead, PartHash


class Reads(Protocol):
    """What answers a rule's reads of other queries: demand.py's Demand."""

    db: BuildState

    async def demand_all(self, qids: Sequence[str], requester: str | None) -> list[str]: ...

    def current_hash(self, qid: str) -> str: ...

    def stored_part(self, qid: str, part: str) -> tuple[Any] | None: ...

    def stored_values(self, qids: Sequence[str]) -> dict[str, Any]: ...

    async def value_of(self, qid: str) -> Any: ...


C = TypeVar("C")  # a rule's configuration: what it reads its declared settings from


class Context(Generic[C]):
    """A rule's only window on the world: every read through it is recorded with its hash.

    A rule typed `ctx: Context[ItsConfiguration]` reads `ctx.settings.NAME` with that field's type."""

    __slots__ = ("_reads", "_build", "_query", "deps", "outputs", "notes")

    def __init__(self, reads: Reads, query: Query) -> None:
        self._reads = reads
        self._build = reads.db
        self._query = query
        self.deps: list[DepGroup] = []
        self.outputs: dict[str, bytes] = {}
        self.notes: dict[str, object] = {}

    @property
    def query_id(self) -> str:
        return self._query.id

    @property
    def root(self) -> Path:
        return self._build.engine.root

    @property
    def settings(self) -> C:
        """The settings this query's rule declared (`@rule(settings=...)`), read from its
        configuration with the types it declares them with; reading another raises."""
        rule = self._query.rule
        if rule.configuration is None and rule.settings:
            raise TypeError(f"rule {rule.name} reads settings but was never configured; a Kbuildfile lists the "
                            "rule as its application configured it (rule.configured(settings))")
        return cast(C, Settings(rule))

    def read(self, path: str | os.PathLike[str]) -> bytes:
        """The bytes of an input file. A missing file is recorded too, so creating it is a change."""
        hasher = self._build.hasher
        key = hasher.key(path)
        try:
            data, digest = hasher.read(key)
        except FileNotFoundError:
            self.deps.append([(FileRead.of(key), ABSENT)])
            raise
        self.deps.append([(FileRead.of(key), digest)])
        return data

    def read_text(self, path: str | os.PathLike[str]) -> str:
        return self.read(path).decode("utf-8")

    def exists(self, path: str | os.PathLike[str]) -> bool:
        hasher = self._build.hasher
        key = hasher.key(path)
        digest = hasher.hash(key)
        self.deps.append([(FileRead.of(key), digest)])
        return digest != ABSENT

    async def query(self, query: Query) -> Any:
        (value,) = await self.query_all([query])
        return value

    async def query_part(self, query: Query, part: str) -> Any:
        """One entry of the value of a query whose rule has parts=True (None if it has none):
        this query then runs again when that entry changes, not when another one does."""
        if not query.rule.parts:
            raise TypeError(f"rule {query.rule.name} has no parts; declare it with @rule(parts=True)")
        build, reads = self._build, self._reads
        build.introduce(query)
        if query.id not in build.green:
            await reads.demand_all([query.id], self._query.id)
        read = reads.stored_part(query.id, part)  # the entry alone, when its bytes can be told
        if read is None:
            (value,) = await self._settle([query])
            if isinstance(value, QueryFailed):
                self.deps.append([(query.id, reads.current_hash(query.id))])
                raise value
            read = (value.get(part),)
        memo = build.memos[query.id]
        self.deps.append([(query.id, PartHash.of(part, memo.parts.get(part, ABSENT)))])
        return read[0]

    async def query_all(self, queries: Sequence[Query], *, return_failures: bool = False) -> list[Any]:
        """Read several queries concurrently. With `return_failures`, a failed one is returned as
        its QueryFailed instead of raising, so a rule can build around it (an index leaving out a
        page that failed its checks)."""
        values = await self._settle(queries)
        current_hash = self._reads.current_hash
        self.deps.append([(q.id, current_hash(q.id)) for q in queries])
        failures = [v for v in values if isinstance(v, QueryFailed)]
        if failures and not return_failures:
            raise next((f for f in failures if f.waiting), failures[0])
        waiting = next((f for f in failures if f.waiting), None)
        if waiting is not None:  # a value built around what waits would be built again, and its calls paid twice
            raise waiting
        return values

    async def _settle(self, queries: Sequence[Query]) -> list[Any]:
        """The values of `queries` (a failed one as its QueryFailed), each brought up to date."""
        build, reads = self._build, self._reads
        me = self._query.id
        for q in queries:
            build.introduce(q)
        ids = [q.id for q in queries]
        # Only what is not settled yet is awaited, without a task per read: a cold build has
        # every query suspended at once, and a task per read was most of its memory.
        pending = [i for i in ids if i not in build.green]
        if pending:
            await reads.demand_all(pending, me)
        known, failed = build.values, build.failed
        missing = [i for i in ids if i not in known or i in failed]
        fetched = reads.stored_values(missing) if missing else {}
        to_run = [i for i in missing if i not in fetched]  # settled from the lock, never stored here
        if to_run:
            fetched.update(zip(to_run, await asyncio.gather(*(reads.value_of(i) for i in to_run))))
        return [fetched[i] if i in fetched else known[i] for i in ids]

    @property
    def state_dir(self) -> Path:
        """The git-ignored folder for local state (logs, caches): rebuildable, never committed."""
        return self._build.engine.state_dir

    @property
    def built_before(self) -> bool:
        """Whether this query has a value from an earlier build, which stands if it fails now."""
        return self._query.id in self._build.memos

    def count(self, name: str, amount: float) -> None:
        """Add to a build-wide counter shown in the report (tokens, cost, calls...)."""
        counters = self._build.report.counters
        counters[name] = counters.get(name, 0) + amount

    def note(self, key: str, value: object) -> None:
        """Record something about this query's output in the lock (a check's verdict, say), so
        that a fresh clone can read it without running anything. JSON values only."""
        self.notes[key] = value

    def warn(self, message: str) -> None:
        """Something the user should know about this query's inputs; shown when the query runs."""
        self._build.report.warnings.setdefault(self._query.id, []).append(message)

    def write(self, path: str, data: bytes | str) -> None:
        """Produce a file (relative to the root). It is written when the rule succeeds, atomically,
        and removed when a later run of this query no longer produces it."""
        # a path outside the outputs' folder is refused now, in the rule; where it leads through
        # the file system (a symlinked folder) is checked when it is written
        why = self._build.engine.outputs.problem(path, resolve=False)
        if why is not None:
            raise PathEscapesRoot(why)
        self.outputs[Path(path).as_posix()] = data.encode() if isinstance(data, str) else bytes(data)

    async def call(
        self, request: Mapping[str, Any], compute: Callable[[], Awaitable[Any]]
    ) -> Any:
        """An expensive call (a model), cached under the hash of `request` and bounded in flight.

        `request` must hold everything that decides the answer; the response must be JSON.
        """
        build = self._build
        return await build.calls.call(request, compute, refresh=build.refresh)

    async def call_many(
        self, requests: Sequence[Mapping[str, Any]], compute_many: Callable[[list[Mapping[str, Any]]], Awaitable[list[Any]]]
    ) -> list[Any]:
        """Many calls a service answers in one round trip (`call` for each, batched): each
        request cached under its own hash, and those no cache holds passed together to
        `compute_many`, which answers them in order."""
        build = self._build
        return await build.calls.call_many(requests, compute_many, refresh=build.refresh)


class Settings:
    """What a rule may read of its configuration: the settings it declared, which are in its
    fingerprint, and nothing else (reading another would hide a setting from the fingerprint)."""

    __slots__ = ("_rule",)

    def __init__(self, rule: Rule) -> None:
        self._rule = rule

    def __getattr__(self, name: str) -> Any:
        rule = self._rule
        if name not in rule.settings:
            raise AttributeError(f"rule {rule.name} reads the setting {name!r} without declaring it; "
                                 f"add it to @rule(settings=...) so that it is part of the rule's fingerprint")
        return getattr(rule.configuration, name)
