"""Rules and queries: a rule is a function; a query is that rule applied to one key."""
from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .hashing import canonical_json, decode_value, hash_bytes
from .sourcetexts import SourceTexts

Key = tuple[Any, ...]
RuleFunction = Callable[..., Awaitable[Any]]


@runtime_checkable
class Judgement(Protocol):
    """What a cutoff hook may return instead of a bool, to say how it decided (a classifier's
    stage, probability and reason); the report and `kbuild explain` show it."""

    same: bool
    stage: str
    probability: float
    reason: str


# A cutoff hook: hook(old, new) or hook(ctx, old, new), plain or async, saying whether the new
# value is the same as the old.
Cutoff = Callable[..., bool | Judgement | Awaitable[bool | Judgement]]


class Query:
    """One rule applied to one key. Its id is how the graph, the memo and the lock name it."""

    __slots__ = ("rule", "key", "id")

    def __init__(self, rule: Rule, key: Key) -> None:
        self.rule = rule
        self.key = key
        self.id = query_id(rule.name, key)  # computed once: the hot path compares ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Query) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return self.id


def query_id(rule_name: str, key: Key) -> str:
    return f"{rule_name}({canonical_json(list(key))[1:-1]})"


@dataclass(frozen=True)
class Decisive:
    """What a setting puts in the fingerprint of a rule that reads it: JSON parameters, code
    (functions and modules, by object or by dotted name) and files (prompt templates)."""

    params: Any = None
    code: tuple[Any, ...] = ()
    files: tuple[Path, ...] = ()


@dataclass(eq=False)
class Rule:
    """How one kind of value is computed.

    The fingerprint covers what decides the output besides the inputs the rule reads: its code,
    the files it includes (prompt templates), its declared version, its parameters and the
    settings it reads. Changing any of them makes this rule's queries stale, and only those.

    A rule reads settings (`ctx.settings.NAME`) only by the names it declares in `settings`,
    and only once it is `configured` with an object holding them: so a setting reaches the
    fingerprint of exactly the rules that read it, never through a closure.
    """

    fn: RuleFunction
    name: str
    version: str | int = 0
    files: tuple[Path, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    cutoff: Cutoff | None = None
    uses: tuple[Any, ...] = ()  # helper functions and modules whose code decides the output too
    settings: tuple[str, ...] = ()  # the names of the settings it reads
    configuration: Any = None  # the object the settings are read from, once configured
    returns: Any = None  # the type of its value (a pydantic model), read back from its JSON
    parts: bool = False  # its value is a JSON object whose entries are hashed one by one, for part reads
    _fingerprint: str | None = field(default=None, repr=False)

    def __call__(self, *key: Any) -> Query:
        try:
            return Query(self, key)
        except TypeError:
            raise TypeError(f"the key of {self.name} must be JSON values (str, int, ...), got {key!r}") from None

    def decode(self, blob: bytes) -> Any:
        """The value stored as `blob`, as this rule's type: decoded once per build, then shared
        by every query that reads it (so a typed value is never validated again per reader)."""
        if self.returns is None or blob[:1] != b"j" or blob == b"jnull":
            return decode_value(blob)
        # the JSON validated as it is parsed: no dict of dicts made first, to be walked again
        return self.returns.model_validate_json(blob[1:])

    def configured(self, configuration: Any) -> Rule:
        """This rule reading its settings from `configuration`. What decides each declared setting
        joins the fingerprint: `configuration.decided_by(name)` where the configuration says (a
        model backend is decided by its code and parameters, not by its object), else the
        setting's value, which must then be JSON."""
        params, code, files = dict(self.params), list(self.uses), list(self.files)
        decided_by = getattr(configuration, "decided_by", None)
        for name in self.settings:
            if not hasattr(configuration, name):
                raise TypeError(f"rule {self.name} reads the setting {name!r}, which "
                                f"{type(configuration).__name__} does not have")
            decided = decided_by(name) if decided_by is not None else Decisive(getattr(configuration, name))
            params[name] = decided.params
            code += decided.code
            files += decided.files
        return replace(self, params=params, uses=tuple(code), files=tuple(dict.fromkeys(files)),
                       configuration=configuration, _fingerprint=None)

    @property
    def fingerprint(self) -> str:
        return self.fingerprint_with(SourceTexts())

    def fingerprint_with(self, sources: SourceTexts) -> str:
        """The fingerprint, computed once per rule, with source texts from `sources` (the engine
        passes those it keeps in its state, which saves tokenizing the code again)."""
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint(sources)
        return self._fingerprint

    def _compute_fingerprint(self, sources: SourceTexts) -> str:
        files = []
        for path in self.files:
            try:
                files.append([path.name, hash_bytes(path.read_bytes())])
            except OSError as exc:
                raise FileNotFoundError(f"rule {self.name}: cannot read {path}: {exc.strerror}") from None
        parts = {
            "code": sources.source_of(self.fn),
            "cutoff": sources.source_of(self.cutoff) if self.cutoff else None,
            "version": self.version,
            "prompts": files,
            "params": dict(self.params),
            "uses": [sources.source_of(u) for u in self.uses],
        }
        return hash_bytes(canonical_json(parts).encode())


def rule(
    fn: RuleFunction | None = None,
    *,
    name: str | None = None,
    version: str | int = 0,
    files: Iterable[str | Path] = (),
    params: Mapping[str, Any] | None = None,
    cutoff: Cutoff | None = None,
    uses: Iterable[Any] = (),
    settings: Iterable[str] = (),
    returns: Any = None,
    parts: bool = False,
) -> Any:
    """Declare a rule: `@rule` or `@rule(version=2, files=["prompts/summary.md"])`.

    `files` (prompt templates, say) are relative to the file that defines the rule. `uses` names
    the helper functions or modules whose code decides the rule's output, so that changing them
    makes the rule's queries stale as changing the rule itself does. `settings` names what the
    rule reads of its configuration (see `Rule.configured`). `returns` types its value: a
    pydantic model the rule returns, which its readers get back as that model. With `parts`, the
    value is a JSON object and a reader may read one entry of it (`ctx.query_part`): that reader
    runs again only when its entry changes, not when another does.
    """

    def wrap(f: RuleFunction) -> Rule:
        if not inspect.iscoroutinefunction(f):
            raise TypeError(f"rule {f.__name__} must be `async def` (it reads other queries with await)")
        here = Path(inspect.getfile(f)).resolve().parent
        resolved = tuple(p if Path(p).is_absolute() else here / p for p in map(Path, files))
        return Rule(f, name or f.__name__, version, resolved, dict(params or {}), cutoff, tuple(uses), tuple(settings),
                    returns=returns, parts=parts)

    return wrap(fn) if fn is not None else wrap
