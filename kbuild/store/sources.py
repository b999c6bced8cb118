"""sources.yml: the sources of one project, as a person writes them.

    # what this project is about (comments are kept when kbuild writes the file back)
    kind: docs            # or: research (sources arrive as found; no specs)
    title: Payments
    sources:
      - id: requirements
        path: docs/requirements.pdf    # relative to the folder of Kbuildfile.py
      - id: rfc-9110
        url: https://www.rfc-editor.org/rfc/rfc9110.txt

Each source entry is validated on its own, so one bad entry fails that source only.
The build never writes this file: it is an input, and a build that edits its own inputs never
settles. The hash of what was fetched lives in raw/<source>/meta.yml.
"""
from __future__ import annotations

import io
import os
import stat
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import ParseResult, urlparse

from pydantic import AnyUrl, BaseModel, ConfigDict, TypeAdapter, ValidationError, field_validator, model_validator
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..text.secrets import without_userinfo
from ..convert import limits
from ..convert.formats import extension
from ..engine.files import atomic_write
from ..text.slugs import slug
from .layout import BadId, check_id
from .writelock import editing

URL_SCHEMES = ("http", "https", "file")
_URL = TypeAdapter(AnyUrl)  # pydantic's parser (the WHATWG rules): hosts, ports, encodings


class SourcesError(ValueError):
    """One readable line about sources.yml: where it is wrong and what to do."""


def check_url(url: str) -> str:
    """A url the fetcher can download: a known scheme, a host and a numeric port, no spaces.
    Checked both by pydantic's parser and by urlparse, which is what urllib fetches with."""
    parts = _parts(url)
    shown = without_userinfo(url)  # an error line never prints a url's password
    if parts.scheme not in URL_SCHEMES:
        raise ValueError(f"url {shown!r} must start with http://, https:// or file://")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError(f"url {shown!r} contains a space or a control character; write a space as %20")
    try:
        _URL.validate_python(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Input should be a valid URL, ")
        raise ValueError(f"url {shown!r} is not a valid url ({reason})") from None
    except ValueError as exc:
        raise ValueError(f"url {shown!r} is not a valid url ({exc})") from None
    if parts.scheme != "file" and not parts.hostname:
        raise ValueError(f"url {shown!r} has no host")
    return url


def _parts(url: str) -> ParseResult:
    """urlparse's parts, or ValueError with the url and what to fix (urlparse's own says only
    "Invalid IPv6 URL")."""
    try:
        return urlparse(url)
    except ValueError as exc:
        raise ValueError(f"url {without_userinfo(url)!r} is not a valid url ({exc}); write the host as in a browser's "
                         "address bar (an IPv6 address in [ ])") from None


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    path: str | None = None
    url: str | None = None
    title: str | None = None
    # a note (kbuild learn) is Markdown with front matter: its status and history reach its pages
    kind: Literal["document", "note"] = "document"

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_id("source", value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @model_validator(mode="after")
    def _one_origin(self) -> Source:
        if (self.path is None) == (self.url is None):
            raise ValueError("give exactly one of `path` or `url`")
        return self

    @model_validator(mode="after")
    def _note_is_a_file(self) -> Source:
        if self.kind == "note" and (self.path is None or not self.path.endswith(".md")):
            raise ValueError("a note is a Markdown file listed by `path` (kbuild learn writes it)")
        return self

    @property
    def origin(self) -> str:
        return self.path or self.url or ""

    @property
    def ext(self) -> str:
        """The extension the raw copy keeps, so readers and converters know what it is."""
        name = self.path or urlparse(self.url or "").path
        ext = os.path.splitext(name)[1].lower()
        return ext if ext and len(ext) <= 10 and ext[1:].isalnum() else ".bin"


DEFAULT_VIEWS = {"docs": ("digest", "user", "developer"), "research": ("digest", "agreements")}
RESERVED_NAMES = {"digest", "user", "developer", "agreements", "index"}


class ViewRequest(BaseModel):
    """A view written on request: one feature, use case or question, drawn from every source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    about: str
    across: list[str] = []  # other projects whose facts the view may draw on

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        check_id("view", value)
        if value in RESERVED_NAMES:
            raise ValueError(f"view name {value!r} is taken by a default view; choose another")
        return value

    @field_validator("across")
    @classmethod
    def _across(cls, value: list[str]) -> list[str]:
        return [check_id("project", p) for p in value]


class SpecRequest(BaseModel):
    """A spec: what a coding agent implements, written from a view."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    view: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_id("spec", value)


class AcceptedDisagreement(BaseModel):
    """A disagreement of two sources a team knows of and accepts (`kbuild check` reports it as
    accepted, not failing): the two facts, `<source>/<slug>` each as `kbuild check` names them,
    and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    facts: tuple[str, str]
    reason: str

    @field_validator("facts")
    @classmethod
    def _facts(cls, value: tuple[str, str]) -> tuple[str, str]:
        for ref in value:
            source, slash, slug = ref.partition("/")
            if not slash:
                raise ValueError(f"fact {ref!r} must be written <source>/<fact>, as `kbuild check` names it")
            check_id("source", source)
            check_id("fact", slug)
        return value

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("say why the disagreement is accepted")
        return value.strip()

    def names(self, first: str, second: str) -> bool:
        return {first, second} == set(self.facts)


class ConceptSettings(BaseModel):
    """What `concepts:` in sources.yml says of the project's concept pages: `across`, the other
    projects whose facts they also quote where those speak of this project's concepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    across: list[str] = []

    @field_validator("across")
    @classmethod
    def _across(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(check_id("project", p) for p in value))


class Project(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["docs", "research"] = "docs"
    title: str | None = None
    sources: list[Any] = []
    views: list[Any] = []
    specs: list[Any] = []
    accepted_disagreements: list[Any] = []
    concepts: Any = None  # a mapping, validated on its own (ConceptSettings): a wrong one fails only itself


class Listing(BaseModel):
    """A parsed sources.yml: the valid sources, and a message for each entry that is not."""

    kind: Literal["docs", "research"]
    title: str | None
    sources: list[Source]
    views: list[ViewRequest] = []
    specs: list[SpecRequest] = []
    accepted: list[AcceptedDisagreement] = []
    concepts: ConceptSettings = ConceptSettings()
    problems: list[str]
    # An entry that names a valid id but is otherwise wrong (`pth:` for `path:`): that source
    # fails with this line and keeps its pages; only an entry that is gone removes them.
    broken: dict[str, str] = {}

    @property
    def ids(self) -> list[str]:
        """Every source the file names, built or broken, in its order."""
        return [s.id for s in self.sources] + [i for i in self.broken if i not in {s.id for s in self.sources}]


_READER: YAML | None = None


def _reader() -> YAML:
    """A loader for reading only: the safe one, in C where ruamel.yaml.clib is installed (7x the
    round-trip loader's speed on a sources.yml of 250 entries: 14 ms against 101 ms)."""
    global _READER
    if _READER is None:
        _READER = YAML(typ="safe")
    return _READER


def _yaml() -> YAML:
    yaml = YAML()  # round-trip: comments, order and quoting survive a write back
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def one_line(error: ValidationError) -> str:
    """A validation error as one readable line: where, and what is wrong."""
    parts = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"]) or "entry"
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def parse(data: bytes, where: str) -> Listing:
    try:
        doc = _reader().load(data.decode("utf-8")) if data.strip() else {}
    except (YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourcesError(f"{where} is not valid YAML ({first}); fix it and build again") from None
    if not isinstance(doc, dict):
        raise SourcesError(f"{where} must be a mapping with a `sources:` list")
    try:
        project = Project.model_validate(dict(doc))
    except ValidationError as exc:
        raise SourcesError(f"{where}: {one_line(exc)}") from None
    sources: list[Source] = []
    problems: list[str] = []
    broken: dict[str, str] = {}
    failed: list[tuple[int, Any, ValidationError]] = []
    seen: set[str] = set()
    for n, entry in enumerate(project.sources, start=1):
        try:
            source = Source.model_validate(dict(entry) if isinstance(entry, dict) else entry)
        except ValidationError as exc:
            failed.append((n, entry, exc))
            continue
        if source.id in seen:
            problems.append(f"{where}: source id {source.id!r} is listed twice; give each source its own id")
            continue
        seen.add(source.id)
        sources.append(source)
    # An entry that does not validate fails as the source it names, which keeps its pages: were
    # it left nameless, the build would take its source for one taken out and delete them
    for n, entry, exc in failed:
        meant = _meant_id(entry)
        if meant is not None and meant not in seen:
            broken[meant] = f"{where}: source {meant}: {one_line(exc)}; its pages are kept until it is fixed"
            seen.add(meant)
        else:
            label = entry.get("id", f"#{n}") if isinstance(entry, dict) else f"#{n}"
            problems.append(f"{where}: source {label}: {one_line(exc)}")
    views = _valid(ViewRequest, project.views, f"{where}: view", problems)
    specs: list[SpecRequest] = []
    for spec in _valid(SpecRequest, project.specs, f"{where}: spec", problems):
        if project.kind == "research":
            problems.append(f"{where}: spec {spec.name!r}: a research project has no specs; move it to a docs project")
        elif spec.view not in {v.name for v in views} | set(DEFAULT_VIEWS["docs"]):
            problems.append(f"{where}: spec {spec.name!r} is written from view {spec.view!r}, which is not requested; "
                            f"add it with `kbuild view add`")
        else:
            specs.append(spec)
    accepted = _valid(AcceptedDisagreement, project.accepted_disagreements, f"{where}: accepted_disagreements",
                      problems)
    concepts = ConceptSettings()
    if isinstance(project.concepts, dict):
        concepts = _valid_one(ConceptSettings, project.concepts, f"{where}: concepts", problems) or concepts
    elif project.concepts is not None:
        problems.append(f"{where}: concepts: must be a mapping, such as `concepts: {{across: [other-project]}}`")
    return Listing(kind=project.kind, title=project.title, sources=sources, views=views, specs=specs,
                   accepted=accepted, concepts=concepts, problems=problems, broken=broken)


M = TypeVar("M", bound=BaseModel)


def _valid(model: type[M], entries: list[Any], label: str, problems: list[str]) -> list[M]:
    """The entries of one list of sources.yml that validate; each that does not is one problem
    ("LABEL #N: what is wrong") and is left out, never the list."""
    found = (_valid_one(model, entry, f"{label} #{n}", problems) for n, entry in enumerate(entries, start=1))
    return [entry for entry in found if entry is not None]


def _valid_one(model: type[M], entry: Any, label: str, problems: list[str]) -> M | None:
    """One entry of sources.yml as `model`, or None and one problem ("LABEL: what is wrong")."""
    try:
        return model.model_validate(dict(entry) if isinstance(entry, dict) else entry)
    except ValidationError as exc:
        problems.append(f"{label}: {one_line(exc)}")
        return None


def _valid_id(value: str) -> bool:
    try:
        check_id("source", value)
        return True
    except ValueError:
        return False


def _meant_id(entry: Any) -> str | None:
    """The id of the source an entry that does not validate was meant for: its `id` (or a key
    misspelt for it: `ie`, `Id`), written as an id (`Shipping` is `shipping`); else the id `kbuild
    add` gives its path or url. None when the entry names nothing an id can be drawn from."""
    if isinstance(entry, str | int):
        entry = {"id": entry}
    if not isinstance(entry, dict):
        return None
    id_keys = [k for k in entry if isinstance(k, str) and len(k.strip()) <= 3
               and SequenceMatcher(None, k.strip().lower(), "id").ratio() >= 0.5]
    for key in sorted(id_keys, key=lambda k: k != "id"):  # the key spelt right first
        value = entry[key]
        if isinstance(value, str | int) and not isinstance(value, bool):
            written = str(value).strip().lower()
            if _valid_id(written):
                return written
            if any(c.isalnum() for c in written) and _valid_id(slug(written)):
                return slug(written)
    origin = entry.get("path") or entry.get("url")
    if isinstance(origin, str):
        try:
            name = urlparse(origin).path if urlparse(origin).scheme in URL_SCHEMES else origin
        except ValueError:  # not a url urlparse reads: its id cannot come from it
            return None
        stem = name.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        if any(c.isalnum() for c in stem) and _valid_id(slug(stem)):
            return slug(stem)
    return None


def resolve_path(root: Path, path: str) -> Path:
    """A local source path, which must stay inside the build root (symlinks followed) and name
    a regular file no larger than the source limit: checked with a stat, before anything opens
    it, since opening a FIFO waits for a writer forever and reading a huge file fills memory."""
    full = (root / path).resolve()
    if not full.is_relative_to(root.resolve()):
        raise SourcesError(
            f"path {path!r} leads outside {root}; copy the file into the project or list it by url"
        )
    try:
        st = full.stat()
    except FileNotFoundError:
        return full  # the caller says it is missing, in its own words
    if stat.S_ISDIR(st.st_mode):
        return full
    if not stat.S_ISREG(st.st_mode):
        raise SourcesError(f"{path} is not a regular file (a pipe, socket or device); list a document instead")
    if st.st_size > limits.MAX_SOURCE_BYTES:
        raise SourcesError(f"{path} is {st.st_size / 2**20:.0f} MiB, larger than the "
                           f"{limits.MAX_SOURCE_BYTES // 2**20} MiB limit; split it or list a smaller file")
    return full


def _dump(yaml: YAML, doc: Any) -> str:
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


NEW_PROJECT = """\
# Sources of this project. kbuild reads this file and never rewrites what you wrote:
# `kbuild add` appends entries and keeps your comments and order.
kind: docs   # docs, or research (sources arrive as found; no specs)
sources: []
"""


def source_for(path_or_url: str, directory: Path, root: Path, source_id: str | None = None) -> Source:
    """The entry `kbuild add` lists for a url, or for a path (from `directory`) to a file inside
    `root`; its id from the file's name unless given. SourcesError (or pydantic's ValidationError
    for a bad id or url) when it cannot be listed."""
    try:
        url = _parts(path_or_url) if "://" in path_or_url else urlparse(path_or_url)
    except ValueError as exc:
        raise SourcesError(str(exc)) from None
    if url.scheme in URL_SCHEMES:
        name = url.path.rstrip("/").rsplit("/", 1)[-1] or url.netloc
        fields = {"url": path_or_url}
    else:
        full = (directory / path_or_url).resolve()
        if not full.is_file():
            raise SourcesError(f"{path_or_url} is not a file; give the path of a document or a url")
        if not full.is_relative_to(root):
            full = import_file(full, root)  # as `dvc add` imports: the project holds what it is built from
        name = full.name
        fields = {"path": full.relative_to(root).as_posix()}
    return Source(id=source_id or slug(name.rsplit(".", 1)[0]), **fields)


IMPORTED = "sources"  # where `kbuild add` copies a file from outside the project, under its root


def import_file(outside: Path, root: Path) -> Path:
    """Copy a file from outside the project to sources/ under `root`, so that the project (and a
    clone of it) holds it; the copy already there is kept when it is the same file."""
    import shutil

    target = root / IMPORTED / outside.name
    if target.exists() and target.read_bytes() != outside.read_bytes():
        raise SourcesError(f"{target.relative_to(root)} exists and is another file; rename {outside.name} "
                           "or copy it into the project yourself")
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copyfile(outside, target)
    return target


def remove(file: Path, section: str, key: str, value: str) -> None:
    """Take the entry whose `key` is `value` out of `section` of sources.yml, keeping the rest of
    the file as a person wrote it (comments, order, quoting)."""
    yaml = _yaml()
    with editing(file.parent):  # read under the lock: another command's entry is not dropped
        doc = yaml.load(file.read_text("utf-8"))
        entries = doc.get(section) if isinstance(doc, dict) else None
        found = [n for n, e in enumerate(entries or []) if isinstance(e, dict) and e.get(key) == value]
        if not found:
            raise SourcesError(f"{file} lists no {section[:-1]} {value!r}")
        del entries[found[0]]
        atomic_write(file, _dump(yaml, doc).encode())


class AlreadyListed(SourcesError):
    """The path or url `kbuild add` was given is listed already (under `id`): nothing to do."""

    def __init__(self, file: Path, origin: str, id: str) -> None:
        super().__init__(f"{origin} is already listed in {file} as source {id!r}")
        self.id = id


def add(file: Path, source: Source | ViewRequest | SpecRequest, named: bool = True) -> Source | ViewRequest | SpecRequest:
    """Append a source, view or spec request to sources.yml (creating it), keeping a person's
    comments and order; what was listed. A source not `named` (its id made from its file name)
    whose id is taken gets a free one (`_free_id`); a name given that is taken is refused."""
    with editing(file.parent):  # read under the lock: another command's entry is not dropped
        return _add(file, source, named)


def _free_id(source: Source, taken: dict[str, str]) -> str:
    """The id of a source whose file name's id another source has (`taken`: each id listed and
    its path or url): by its extension where the other's differs, else by its folder, else a
    number ("test.xlsx" beside "test.pdf" is "test-xlsx", "sub/a.md" beside "a.md" is "sub-a"),
    so that a folder of documents is listed whole."""
    def ext(origin: str) -> str:
        return slug(extension(origin.rstrip("/")))

    origin = source.path or source.url or ""
    folders = origin.rstrip("/").split("/")[:-1]
    by_ext = f"{source.id}-{ext(origin)}" if ext(origin) else ""
    by_folder = f"{slug(folders[-1])}-{source.id}" if folders and slug(folders[-1]) else ""
    tries = [by_ext, by_folder] if ext(origin) != ext(taken[source.id]) else [by_folder, by_ext]
    tries += [f"{source.id}-{n}" for n in range(2, len(taken) + 3)]
    return next(t for t in tries if t and t not in taken and not _bad_id(t))


def _bad_id(value: str) -> bool:
    try:
        check_id("source", value)
    except BadId:
        return True
    return False


def _add(file: Path, source: Source | ViewRequest | SpecRequest, named: bool) -> Source | ViewRequest | SpecRequest:
    yaml = _yaml()
    text = file.read_text("utf-8") if file.exists() else NEW_PROJECT
    parse(text.encode(), str(file))  # refuse to write into a file that is already broken
    doc = yaml.load(text)
    section, key = {Source: ("sources", "id"), ViewRequest: ("views", "name"), SpecRequest: ("specs", "name")}[type(source)]
    entries = doc.get(section)
    if not isinstance(entries, CommentedSeq):
        entries = CommentedSeq(entries or [])
        entries.fa.set_block_style()
        doc[section] = entries
    if isinstance(source, Source):
        origin = source.path or source.url
        same = [e for e in entries if isinstance(e, dict) and origin in (e.get("path"), e.get("url"))]
        if same:
            raise AlreadyListed(file, str(origin), str(same[0].get("id")))
    value = getattr(source, key)
    taken = {str(e.get(key)): str(e.get("path") or e.get("url") or "") for e in entries if isinstance(e, dict)}
    if value in taken and isinstance(source, Source) and not named:
        source = source.model_copy(update={"id": _free_id(source, taken)})
    elif value in taken:
        raise SourcesError(f"{file} already lists {section[:-1]} {value!r}; choose another name")
    entries.append(CommentedMap(source.model_dump(exclude_none=True, exclude_defaults=not isinstance(source, SpecRequest))))
    written = _dump(yaml, doc)
    problems = parse(written.encode(), str(file)).problems
    if problems:
        raise SourcesError(problems[-1])
    atomic_write(file, written.encode())  # whole: a build reading it meanwhile reads one version
    return source
