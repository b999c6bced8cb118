"""Notes: what was learned while working, kept as Markdown sources with their status and history.

    ---
    id: refund-days
    revision: 2
    status: candidate        # candidate, confirmed, superseded or withdrawn
    title: Refunds are paid back within 3 working days
    supersedes: []
    superseded_by: null
    confirmed_by: null
    evidence: [{path: docs/refunds.md, hash: ...}]
    history: [{action: add, revision: 1, at: ..., by: claude-code, origin: agent, session: s-1}]
    ---
    Refunds are paid back within 3 working days.

A note lives in kb/PROJECT/notes/ID.md and is listed in sources.yml (`kind: note`), so the
ordinary build makes its facts, summaries and views; `kbuild learn` writes it (docs/learning.md),
never a build. The revision is the optimistic lock a delta names: a change is applied only to
the revision it was written against.
"""
from __future__ import annotations

import io
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from ..store.layout import Store, check_id

Status = Literal["candidate", "confirmed", "superseded", "withdrawn"]
Origin = Literal["user", "agent", "meeting", "tool", "web"]
UNTRUSTED: frozenset[str] = frozenset({"tool", "web"})  # text from these may only ever be a candidate
CURRENT: frozenset[str] = frozenset({"candidate", "confirmed"})  # what `context` offers unless asked for history
FRONT = re.compile(r"\A---\n(.*?)\n---\n?", re.S)


class NoteError(ValueError):
    """One readable line about a note: which one, what is wrong, what to do."""


class Provenance(BaseModel):
    """Who or what wrote a change, from where: recorded with every revision of a note."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    by: str = Field(min_length=1, max_length=200, description="who or what: a person, an agent, a tool")
    origin: Origin = "agent"
    session: str | None = Field(None, max_length=200)
    file: str | None = Field(None, max_length=500, description="the file the writer was working on")
    message: str | None = Field(None, max_length=200,
                                description="the id of the message of the transcript `file` (JSON Lines) it "
                                            "comes from; a message that is not the user's enters as a candidate")
    evidence: str | None = Field(None, max_length=500,
                                 description="a file of the project the note rests on; when it changes the note "
                                             "needs review")

    @property
    def trusted(self) -> bool:
        return self.origin not in UNTRUSTED


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    hash: str  # of the file when the note was written against it (xxh3-128, as the engine hashes)


class Event(BaseModel):
    """One step of a note's history."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["add", "append", "supersede", "superseded", "withdraw", "confirm", "restored"]
    revision: int
    at: str
    by: str
    origin: Origin
    session: str | None = None
    file: str | None = None
    message: str | None = None


class NoteHeader(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    revision: int = Field(ge=1)
    status: Status = "candidate"
    title: str
    supersedes: list[str] = []
    superseded_by: str | None = None
    confirmed_by: str | None = None
    withdrawn_because: str | None = None
    evidence: list[Evidence] = []
    history: list[Event] = []

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_id("note", value)

    @property
    def untrusted(self) -> bool:
        """Whether any of its text came from a place that cannot be trusted (a web page, tool output)."""
        return any(e.origin in UNTRUSTED for e in self.history if e.action in ("add", "append", "supersede"))


class Note(BaseModel):
    header: NoteHeader
    body: str


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[attr-defined]
    return yaml


def parse(data: bytes | str, where: str) -> Note:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    found = FRONT.match(text)
    if found is None:
        raise NoteError(f"{where} has no front matter (--- id, revision, status ... ---); write notes with `kbuild learn`")
    try:
        fields = _yaml().load(found.group(1))
        header = NoteHeader.model_validate(fields)
    except YAMLError as exc:
        raise NoteError(f"{where}: its front matter is not valid YAML ({str(exc).splitlines()[0]})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise NoteError(f"{where}: front matter {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return Note(header=header, body=text[found.end():].strip("\n") + "\n")


def render(note: Note) -> str:
    out = io.StringIO()
    _yaml().dump(note.header.model_dump(mode="json"), out)
    return f"---\n{out.getvalue().rstrip()}\n---\n{note.body.rstrip()}\n"


def read(root: Path, store: Store, project: str, note: str) -> Note | None:
    path = root / store.note(project, note)
    try:
        return parse(path.read_bytes(), store.note(project, note))
    except FileNotFoundError:
        return None


def project_notes(root: Path, store: Store, project: str) -> dict[str, Note]:
    """Every note of a project by id (a file that does not parse is left out: `kbuild check` names it)."""
    found: dict[str, Note] = {}
    for path in sorted((root / store.notes_dir(project)).glob("*.md")):
        try:
            found[path.stem] = parse(path.read_bytes(), str(path.relative_to(root)))
        except NoteError:
            continue
    return found


def file_hash(path: Path) -> str:
    """A file's hash as the engine takes it ("absent" for a missing file)."""
    from ..engine import hash_bytes

    try:
        return hash_bytes(path.read_bytes())
    except OSError:
        return "absent"


def changed_evidence(root: Path, header: NoteHeader) -> list[str]:
    """The evidence files that changed (or went) since the note was written against them."""
    return [e.path for e in header.evidence if file_hash(root / e.path) != e.hash]


def effective_status(header: NoteHeader, changed: list[str]) -> str:
    """The status a reader sees: a current note whose evidence changed needs review."""
    return "needs-review" if changed and header.status in CURRENT else header.status


def banner(header: NoteHeader, changed: list[str]) -> str:
    """The line every page built from the note starts with, so a view or a context never shows a
    candidate as a settled rule. No number in it: a rewrite must keep every number of its text."""
    first = header.history[0] if header.history else None
    said = f" by {first.by} ({first.origin})" if first else ""
    status = effective_status(header, changed)
    if status == "needs-review":
        line = (f"**Note needing review** ({header.status}): its evidence {', '.join(changed)} changed since it was "
                f"written; re-read it before relying on it.")
    elif status == "candidate":
        line = f"**Candidate note**, not confirmed (written{said}): a lead to check, not a settled rule."
    elif status == "confirmed":
        line = f"**Confirmed note** (written{said}, confirmed by {header.confirmed_by or 'someone'})."
    elif status == "superseded":
        line = f"**Superseded note**: kept for history; the current one is {header.superseded_by}."
    else:
        line = f"**Withdrawn note**: kept for history, no longer held ({header.withdrawn_because or 'no reason given'})."
    return f"> {line}\n"


STATUS_WORDS = {"candidate": "candidate note, not confirmed", "confirmed": "confirmed note",
                "needs-review": "note needing review", "superseded": "superseded note", "withdrawn": "withdrawn note"}


def note_title(header: NoteHeader, changed: list[str]) -> str:
    """The note's title with its status, as views, indexes and context crumbs show it: a
    section drawn from a candidate says so in its heading."""
    return f"{header.title} ({STATUS_WORDS[effective_status(header, changed)]})"


def note_text(note: Note, changed: list[str]) -> str:
    """What a note's facts are built from: its banner, its title as a heading, its body."""
    return f"{banner(note.header, changed)}\n# {note.header.title}\n\n{note.body.rstrip()}\n"


def unlink_forgotten(root: Path, store: Store, project: str, forgotten: str, by: str) -> list[str]:
    """Take a forgotten note out of the chains it was in: a note it superseded is current again
    (a candidate: what replaced it is gone, so it is re-read before it is relied on), and a note
    that superseded it no longer names it. The ids of the notes changed, each one revision on."""
    from ..engine import atomic_write

    changed = []
    for note_id, note in project_notes(root, store, project).items():
        header = note.header
        if header.superseded_by != forgotten and forgotten not in header.supersedes:
            continue
        update: dict[str, object] = {"revision": header.revision + 1,
                                     "supersedes": [i for i in header.supersedes if i != forgotten]}
        if header.superseded_by == forgotten:
            update |= {"superseded_by": None, "status": "candidate", "confirmed_by": None}
        revised = header.model_copy(update=update)
        revised.history = [*header.history, Event(action="restored", revision=revised.revision, at=now(), by=by,
                                                  origin="user")]
        atomic_write(root / store.note(project, note_id), render(Note(header=revised, body=note.body)).encode())
        changed.append(note_id)
    return changed


def retired(store_folder: Path) -> dict[str, str]:
    """The facts folder of every note that is no longer current (superseded or withdrawn), with
    its status: what `kbuild context` leaves out unless asked for the history."""
    found = {}
    for path in sorted(store_folder.glob("*/notes/*.md")):
        try:
            header = parse(path.read_bytes(), path.name).header
        except NoteError:
            continue
        if header.status not in CURRENT:
            found[f"{path.parent.parent.name}/facts/{header.id}/"] = header.status
    return found


def note_statuses(root: Path, store: Store, projects: list[str]) -> list[tuple[str, str, list[str]]]:
    """(note path, status as a reader sees it, evidence files changed) for every note, what
    `kbuild status` lists."""
    found = []
    for project in projects:
        for note_id, note in project_notes(root, store, project).items():
            changed = changed_evidence(root, note.header)
            found.append((store.note(project, note_id), effective_status(note.header, changed), changed))
    return found
