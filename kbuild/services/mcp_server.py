"""`kbuild mcp`: the store served to MCP clients (Claude Code, Cursor, Copilot...) over stdio.

Tools `search`, `context`, `show`, `status` and `explain`, and a resource for every page of the
store (the root index first); `learn` (a delta of notes, kbuild.notes.learning) only when the server
is started with `--allow-learn`. Each tool answers with the JSON its command prints with `--json`
(kbuild/services/answers.py, docs/json.md), built by the same functions. Read-only unless learning is
allowed, and even then it writes notes only: the server never
starts a build and writes nothing (not even the lookup log `kbuild search` keeps); a client
that wants fresh pages runs `kbuild` itself. Pages are named by their path relative to the
repository root (the Kbuildfile's folder), and a page's resource URI is `kbuild://` + that id.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import Field

from . import answers
from .answers import Answer
from .browse import NotAPage, open_page
from ..retrieval.search import UnknownProject, compose, question_embedder, render_context, search, store_folder
from ..store.layout import Store as StoreLayout

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mcp.server.lowlevel.helper_types import ReadResourceContents
    from mcp.server.mcpserver import MCPServer
    from mcp_types import Resource

    from ..buildfile import Buildfile
    from ..cli.session import Session

SCHEME = "kbuild://"

# The tools' parameters (at module level: their annotations are read from here)
Project = Annotated[str | None, Field(description="one project of the store only: the name of a folder under kb/")]
Lexical = Annotated[bool, Field(description="rank by words only, even when the store ranks by meaning too")]

INSTRUCTIONS = """This server reads a kbuild knowledge base (Markdown pages under kb/), read-only.
Start with `context` (a question in your own words; it returns the relevant facts within a token
budget), or `search` for the pages whose summaries match, then `show` a page id to read it with
its parent and children. Page ids are paths from the repository root (kb/...), and each page is
also a resource at kbuild://<id>; kbuild://kb/index.md is the root index. `status` says whether
the store is up to date (the server never builds: run `kbuild` for that); `explain` says why a
page would rebuild and what it was built from."""
LEARN_INSTRUCTIONS = """ This server also offers `learn`: write back what you found as notes
(a delta, schema kbuild.delta/1), each action naming the revision of the note you read (0 for a
new note) and your provenance; a refusal gives the note's current text to re-read. Notes enter as
candidates; their pages follow at the next `kbuild`."""


T = TypeVar("T")


class StoreError(Exception):
    """A question the store cannot answer as asked: the message says what to ask instead."""


class Store:
    """One knowledge base, read: the Kbuildfile is loaded once (it names the store), the pages
    are read afresh at every call, so a build made meanwhile is seen at once."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.spec, engine = self._load()
        self.root = self.spec.root.resolve()
        self.store = store_folder(self.spec).resolve()
        self.embedder = question_embedder(self.spec, engine)  # None: ranked by words only

    def _load(self) -> tuple[Buildfile, Any]:
        from ..cli.session import KbuildError

        # a Kbuildfile that prints must not write into the protocol's stdout
        with contextlib.redirect_stdout(sys.stderr):
            try:
                return self.session.load()
            except KbuildError as exc:
                raise StoreError(exc.format_message()) from None

    def _by_meaning(self, look: Callable[[], T]) -> T:
        """`look` up; an embedder that cannot work, or a project that is not one of the store's
        (`../..`, a path: kbuild.retrieval.search reads nothing outside the store), is one message."""
        from ..retrieval.embedding import EmbeddingError

        try:
            return look()
        except EmbeddingError as exc:
            raise StoreError(f"{exc}; or turn semantic ranking off in the Kbuildfile") from None
        except UnknownProject as exc:
            raise StoreError(str(exc)) from None

    def search(self, query: str, project: str | None = None, limit: int = 5, lexical: bool = False) -> Answer:
        if not query.strip():
            raise StoreError("give a query: a few words of what you look for")
        if limit < 1:
            raise StoreError("limit must be 1 or more")
        project = project or None
        return answers.search_answer(query, project, self._by_meaning(
            lambda: search(self.store, self.root, query, project, limit, None if lexical else self.embedder)))

    def context(self, question: str, budget: int = 4000, project: str | None = None, history: bool = False,
                lexical: bool = False) -> Answer:
        if not question.strip():
            raise StoreError("give a question")
        if budget < 1:
            raise StoreError("budget must be 1 token or more")
        project = project or None
        kept, summarised, trace = self._by_meaning(
            lambda: compose(self.store, self.root, question, budget, project, history=history,
                            embedder=None if lexical else self.embedder))
        text = render_context(question, kept, summarised)
        return answers.context_answer(question, project, budget, kept, summarised, trace, text)

    def show(self, page: str) -> Answer:
        self._refuse_raw_copy(page)
        try:
            return answers.show_answer(open_page(self.root / page, self.store, self.root))
        except NotAPage:
            raise StoreError(f"{page} is not a page of the store; page ids are paths from the repository root, "
                             "as `search` gives them (kb/index.md is the top)") from None

    def _refuse_raw_copy(self, page: str) -> None:
        """A source's copy under raw/ is never served: it keeps the source as it was, secrets
        and all, which every page built from it has removed (its text.md is served instead)."""
        where = (self.root / page).resolve()
        parts = where.relative_to(self.store).parts if where.is_relative_to(self.store) else ()
        if parts[1:2] != ("raw",):
            return
        store = StoreLayout(store_folder(self.spec).relative_to(self.spec.root).as_posix())
        text = store.text(parts[0], parts[2]) if len(parts) > 3 else store.facts_index(parts[0])
        raise StoreError(f"{page} is a source's raw copy, which this server does not serve (it keeps what the "
                         f"pages redact, secrets included); read its text at {text}")

    def status(self) -> Answer:
        from .status import status

        spec, engine = self._load()
        return answers.status_answer(status(engine, self._targets(spec)))

    def explain(self, what: str) -> Answer:
        from .status import explain

        spec, engine = self._load()
        found = explain(engine, self._targets(spec), what)
        if found is None:
            raise StoreError(f"{what} is neither a recorded query nor a file one wrote")
        return answers.explain_answer(found)

    def learn(self, delta: dict[str, Any], dry_run: bool = False) -> Answer:
        """A delta applied to the notes (kbuild.notes.learning), as `kbuild learn` applies it; refused
        whole, with the note's current text, when it was written against another revision."""
        import json

        from ..notes.learning import BadDelta, DeltaRefused, learn_answer, parse_delta, plan_and_apply, plan_delta

        app = self.spec.application
        if app is None:
            raise StoreError(f"{self.spec.path} defines no knowledge base")
        try:
            parsed = parse_delta(json.dumps(delta), "the delta")
            # applied under the project's write lock, checked against what it changes: a second
            # agent's delta on the same revision is refused, never lost
            plan = plan_delta(self.root, app.store, parsed) if dry_run else plan_and_apply(self.root, app.store, parsed)
        except BadDelta as exc:
            raise StoreError(str(exc)) from None
        except DeltaRefused as exc:
            raise StoreError(str(exc) + (f"\n\n{exc.current}" if exc.current else "")) from None
        return learn_answer(plan, not dry_run)

    def _targets(self, spec: Buildfile) -> list[Any]:
        from ..cli.session import KbuildError

        try:
            return self.session.targets(spec)
        except KbuildError as exc:
            raise StoreError(exc.format_message()) from None

    def pages(self) -> list[str]:
        """Every page's id, the root index first, then in path order (raw/ holds source copies, not pages)."""
        found = sorted(p.relative_to(self.root).as_posix() for p in self.store.rglob("*.md")
                       if p.is_file() and "raw" not in p.relative_to(self.store).parts[1:2])
        top = (self.store / "index.md").relative_to(self.root).as_posix()
        return ([top] if top in found else []) + [p for p in found if p != top]

    def read(self, page: str) -> str:
        return self.show(page)["text"]


def server(store: Store, allow_learn: bool = False) -> MCPServer:
    """The MCP server over `store`: its tools, and its pages as resources; with `allow_learn`,
    the one tool that writes (`learn`: a delta of notes, never a build)."""
    from mcp.server.lowlevel.helper_types import ReadResourceContents
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
    from mcp_types import Resource, ToolAnnotations

    from .. import __version__

    class StoreServer(MCPServer):
        """Resources listed from the store at every request, so they follow the builds."""

        async def list_resources(self) -> list[Resource]:
            pages = store.pages()
            return [Resource(uri=SCHEME + page, name=page, mime_type="text/markdown",
                             description="the root index of the knowledge base" if page == pages[0] else None)
                    for page in pages]

        async def read_resource(self, uri: Any, context: Any = None) -> Iterable[ReadResourceContents]:
            uri = str(uri)
            if not uri.startswith(SCHEME):
                raise ResourceNotFoundError(f"{uri}: kbuild's resources are {SCHEME}<page id>")
            try:
                text = store.read(uri[len(SCHEME):])
            except StoreError as exc:
                raise ResourceNotFoundError(str(exc)) from None
            return [ReadResourceContents(content=text, mime_type="text/markdown")]

    app = StoreServer("kbuild", instructions=INSTRUCTIONS + (LEARN_INSTRUCTIONS if allow_learn else ""),
                      version=__version__, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    def answer(call: Any, *args: Any) -> Answer:
        try:
            return call(*args)
        except StoreError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # a tool fails as a message, never a traceback on the wire
            raise ToolError(f"{type(exc).__name__}: {exc}") from None

    @app.tool(annotations=read_only)
    def search(query: Annotated[str, Field(description="words of what you look for")],
               project: Project = None,
               limit: Annotated[int, Field(description="how many hits at most")] = 5,
               lexical: Lexical = False) -> dict[str, Any]:
        """BM25 over every index line of the store (the pages' one-line summaries): the best pages
        first, each with its id (path from the repository root). Schema kbuild.search/2."""
        return answer(store.search, query, project, limit, lexical)

    @app.tool(annotations=read_only)
    def context(question: Annotated[str, Field(description="the question, in your own words")],
                budget: Annotated[int, Field(description="tokens the context may use")] = 4000,
                project: Project = None,
                history: Annotated[bool, Field(description="include notes that were superseded or withdrawn")] = False,
                lexical: Lexical = False) -> dict[str, Any]:
        """A context for the question: the facts that match, grouped by section and kept whole
        until the token budget is spent, the rest as one-line summaries. `text` is the Markdown;
        `sections` and `summaries` name the pages. A note that is only a candidate says so at its
        top. Schema kbuild.context/2."""
        return answer(store.context, question, budget, project, history, lexical)

    @app.tool(annotations=read_only)
    def show(page: Annotated[str, Field(description="a page id: its path from the repository root, "
                                                    "e.g. kb/index.md")]) -> dict[str, Any]:
        """A page of the store with its parent index and the pages it links below it, to walk the
        store up and down (kb/index.md is the top). Schema kbuild.show/1."""
        return answer(store.show, page)

    @app.tool(annotations=read_only)
    def status() -> dict[str, Any]:
        """What is stale, grouped by what changed, and what a build would run; the server never
        builds (run `kbuild` for that). Schema kbuild.status/1."""
        return answer(store.status)

    @app.tool(annotations=read_only)
    def explain(what: Annotated[str, Field(description="a page id (a file a query wrote) or a query id")]) -> dict[str, Any]:
        """Why a page would rebuild, what it was built from and what is built on it.
        Schema kbuild.explain/1."""
        return answer(store.explain, what)

    if allow_learn:
        writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                 open_world_hint=False)

        @app.tool(annotations=writes)
        def learn(delta: Annotated[dict[str, Any], Field(description="a delta, schema kbuild.delta/1 "
                                                                     "(docs/learning.md): project and actions")],
                  dry_run: Annotated[bool, Field(description="only say what it would change")] = False
                  ) -> dict[str, Any]:
            """Write back what you learned as notes: add, append, supersede or withdraw, each action
            naming the revision of its note you read (0 for a new note) and your provenance. A
            note enters as a candidate; a delta written against an older revision is refused with
            the note's current text: re-read it and send the delta again. Nothing is built: the
            notes' pages follow at the next `kbuild`. Schema kbuild.learn/1."""
            return answer(store.learn, delta, dry_run)

    return app


def serve(session: Session, allow_learn: bool = False) -> None:
    """Serve the store of `session` over stdin and stdout until the client closes them."""
    sys.dont_write_bytecode = True  # read-only means no __pycache__ for the Kbuildfile either
    app = server(Store(session), allow_learn)
    with contextlib.suppress(KeyboardInterrupt):
        app.run("stdio")


__all__ = ["SCHEME", "Store", "StoreError", "serve", "server"]
