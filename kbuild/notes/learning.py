"""Deltas: what an agent or a person learned, written back as notes through a checked channel.

A delta (`kbuild learn DELTA.json`, the MCP tool `learn`) is a list of actions from a whitelist
(add, append, supersede, withdraw), each naming its note, the revision of the note it was
written against and its provenance. It is applied whole or not at all: every action's base
revision must be the revision on disk (an optimistic lock), or the delta is refused with the
note's current text, so its writer re-reads and decides; there is never a text merge. The format
is docs/learning.md (schema kbuild.delta/1).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from . import note as notes
from .note import Event, Evidence, Note, NoteError, NoteHeader, Provenance
from ..store.layout import Store, check_id

SCHEMA = "kbuild.delta/1"
MAX_TEXT = 20_000  # characters of one action's text: a note is a finding, not a document


NoteId = Annotated[str, AfterValidator(lambda value: check_id("note", value))]


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    note: NoteId
    provenance: Provenance


class AddNote(_Action):
    action: Literal["add"]
    base_revision: Literal[0] = Field(0, description="0: the note must not exist yet")
    title: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    status: Literal["candidate", "confirmed"] = Field(
        "candidate", description="confirmed only for a person's own words (origin user)")


class AppendNote(_Action):
    action: Literal["append"]
    base_revision: int = Field(ge=1)
    text: str = Field(min_length=1, max_length=MAX_TEXT)


class SupersedeNote(_Action):
    action: Literal["supersede"]
    base_revision: int = Field(ge=1)
    by: NoteId = Field(description="the id of the new note that replaces it")
    title: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=MAX_TEXT)


class WithdrawNote(_Action):
    action: Literal["withdraw"]
    base_revision: int = Field(ge=1)
    reason: str = Field(min_length=1, max_length=500)


Action = Annotated[AddNote | AppendNote | SupersedeNote | WithdrawNote, Field(discriminator="action")]


class Delta(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["kbuild.delta/1"] = Field(alias="schema")
    project: Annotated[str, AfterValidator(lambda value: check_id("project", value))]
    actions: list[Action] = Field(min_length=1, max_length=100)


class Step(BaseModel):
    """One change the delta makes: what `--dry-run` shows and the JSON answer lists."""

    action: str
    note: str
    path: str
    from_revision: int
    to_revision: int
    status: str


class Plan(BaseModel):
    project: str
    steps: list[Step]
    writes: dict[str, str]  # note path -> its new text
    new_sources: list[str]  # note ids to list in sources.yml
    bases: dict[str, int] = {}  # note id -> its revision when planned (0: absent), checked again when applied


class BadDelta(ValueError):
    """A delta that is not a delta (not JSON, another schema, a field wrong): one line."""


class DeltaRefused(ValueError):
    """A delta that cannot be applied: why, in one line (and, for a conflict, the current text)."""

    def __init__(self, message: str, current: str | None = None, note: str | None = None,
                 revision: int | None = None) -> None:
        super().__init__(message)
        self.current = current
        self.note = note
        self.revision = revision


def _checked(text: str, where: str, again: str = "send the delta again") -> None:
    """The checks a source's text gets, applied before the delta is stored."""
    from ..text.injection import find_injections
    from ..text.secrets import find_secrets

    control = next((c for c in text if c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cs")), None)
    if control is not None:  # a NUL or an escape sequence in a note fails every build after it
        raise DeltaRefused(f"{where} holds the control character U+{ord(control):04X}; a note is text: take it "
                           "out (tabs and line breaks may stay) and send the delta again")
    secrets = sorted(set(find_secrets(text)))
    if secrets:
        raise DeltaRefused(f"{where} holds what looks like {', '.join(secrets)}; take it out (and rotate it if it "
                           f"is real), then {again}")
    injections = find_injections(text)
    if injections:
        raise DeltaRefused(f"{where} holds {injections[0]}; a note states what was found, it does not instruct "
                           "the model that reads it")


def _evidence(root: Path, provenance: Provenance, where: str) -> list[Evidence]:
    from ..engine import hash_bytes

    if provenance.evidence is None:
        return []
    full = (root / provenance.evidence).resolve()
    if not full.is_relative_to(root.resolve()) or not full.is_file():
        raise DeltaRefused(f"{where}: evidence {provenance.evidence!r} is not a file inside the project; give a "
                           "path from the project's root")
    return [Evidence(path=full.relative_to(root.resolve()).as_posix(), hash=hash_bytes(full.read_bytes()))]


def check_arriving(root: Path, note: Note, where: str) -> None:
    """The checks a delta passes, made of a note that arrives whole with its history (a bundle's,
    `kbuild import`): its words hold no secret and instruct no model, its evidence lies inside the
    project, and it says confirmed only when a person made it so (its last words were a person's
    own, or a person confirmed it after them). DeltaRefused saying which."""
    header = note.header
    for text in (header.title, note.body, header.withdrawn_because or ""):
        _checked(text, where, again="export the bundle again")
    for evidence in header.evidence:
        if not (root / evidence.path).resolve().is_relative_to(root.resolve()):
            raise DeltaRefused(f"{where}: evidence {evidence.path!r} is not a path inside the project")
    if header.status != "confirmed":
        return
    worded = [n for n, e in enumerate(header.history) if e.action in ("add", "append", "supersede")]
    last = header.history[worded[-1]] if worded else None
    if last is not None and last.origin == "user":
        return
    if any(e.action == "confirm" and e.origin == "user" for e in header.history[worded[-1] + 1 if worded else 0:]):
        return
    writer = f" (its last words are {last.by}'s, {last.origin})" if last is not None else ""
    raise DeltaRefused(f"{where} says confirmed, but no person confirmed it{writer}; only a person's own words may "
                       "enter as confirmed: `kbuild confirm` it where it was written, then export the bundle again")


def _event(action: str, revision: int, provenance: Provenance, at: str) -> Event:
    return Event(action=action, revision=revision, at=at, by=provenance.by, origin=provenance.origin,  # type: ignore[arg-type]
                 session=provenance.session, file=provenance.file, message=provenance.message)


def _transcript_role(root: Path, provenance: Provenance, where: str) -> str | None:
    """The role of the transcript message the provenance names (None when it names none): what
    decides whether its words may be confirmed, whatever the writer says its origin is."""
    from ..convert.transcript import role_of

    if provenance.message is None:
        return None
    full = (root / (provenance.file or "")).resolve()
    if provenance.file is None or not full.is_relative_to(root.resolve()) or not full.is_file():
        raise DeltaRefused(f"{where}: message {provenance.message!r} needs `file`, the transcript (JSON Lines) inside "
                           "the project it is from")
    role = role_of(full.read_bytes(), provenance.message)
    if role is None:
        raise DeltaRefused(f"{where}: {provenance.file} is not a transcript with a message {provenance.message!r}; "
                           "name a message id it has")
    return role


def plan(root: Path, store: Store, delta: Delta, listed: set[str]) -> Plan:
    """What applying the delta writes, every action checked against the notes as they are on
    disk (and as the earlier actions of the same delta leave them). `listed`: the source ids
    sources.yml lists already. DeltaRefused when any action cannot be applied."""
    at = notes.now()
    current: dict[str, Note | None] = {}
    steps: list[Step] = []
    new_sources: list[str] = []

    def note(note_id: str) -> Note | None:
        if note_id not in current:
            try:
                current[note_id] = notes.read(root, store, delta.project, note_id)
            except NoteError as exc:
                raise DeltaRefused(str(exc)) from None
        return current[note_id]

    def create(note_id: str, title: str, text: str, status: str, action: _Action, supersedes: list[str]) -> None:
        found = note(note_id)
        if found is not None:
            raise DeltaRefused(f"note {note_id} exists (revision {found.header.revision}); re-read it and append to "
                               "it or supersede it", notes.render(found), note_id, found.header.revision)
        if note_id in listed:
            raise DeltaRefused(f"{store.sources_file(delta.project)} lists a source {note_id!r} already; give the "
                               "note another id")
        header = NoteHeader(id=note_id, revision=1, status=status, title=title, supersedes=supersedes,  # type: ignore[arg-type]
                            evidence=_evidence(root, action.provenance, f"note {note_id}"),
                            history=[_event("add" if not supersedes else "supersede", 1, action.provenance, at)])
        current[note_id] = Note(header=header, body=text.strip() + "\n")
        new_sources.append(note_id)
        steps.append(Step(action="add", note=note_id, path=store.note(delta.project, note_id), from_revision=0,
                          to_revision=1, status=status))

    def existing(action: _Action, base: int) -> Note:
        found = note(action.note)
        if found is None:
            raise DeltaRefused(f"note {action.note} does not exist in {delta.project}; add it first "
                               "(base_revision 0)", note=action.note, revision=0)
        if found.header.revision != base:
            raise DeltaRefused(
                f"note {action.note} is at revision {found.header.revision}, but the delta was written against "
                f"revision {base}: nothing was applied; re-read the note (its current text follows) and write the "
                f"delta again against revision {found.header.revision}",
                notes.render(found), action.note, found.header.revision)
        return found

    def revise(found: Note, action: str, provenance: Provenance, **changes: object) -> None:
        """The note one revision on, with `changes` to its header and an event in its history."""
        header = found.header.model_copy(update={"revision": found.header.revision + 1, **changes})
        header.history = [*found.header.history, _event(action, header.revision, provenance, at)]
        current[header.id] = Note(header=header, body=found.body)
        steps.append(Step(action=action, note=header.id, path=store.note(delta.project, header.id),
                          from_revision=found.header.revision, to_revision=header.revision, status=header.status))

    for n, action in enumerate(delta.actions, start=1):
        where = f"action {n} ({action.action} {action.note})"
        for text in (getattr(action, "title", ""), getattr(action, "text", ""), getattr(action, "reason", "")):
            _checked(text, where)
        role = _transcript_role(root, action.provenance, where)
        if role is not None and role != "user" and action.provenance.origin == "user":
            raise DeltaRefused(f"{where}: message {action.provenance.message} of {action.provenance.file} was said by "
                               f"the {role}, not the user; give its origin as agent or tool")
        if isinstance(action, AddNote):
            if action.status == "confirmed" and action.provenance.origin != "user":
                raise DeltaRefused(f"{where}: only a person's own words (origin user) may enter as confirmed; this is "
                                   f"from {action.provenance.origin}: send it as a candidate and `kbuild confirm` it")
            create(action.note, action.title, action.text, action.status, action, [])
            continue
        found = existing(action, action.base_revision)
        if found.header.status not in notes.CURRENT:
            raise DeltaRefused(f"{where}: note {action.note} is {found.header.status}; only a current note can change")
        if isinstance(action, AppendNote):
            # new words are unconfirmed words: the note is a candidate again until someone confirms it
            revise(found, "append", action.provenance, status="candidate", confirmed_by=None,
                   evidence=[*found.header.evidence, *_evidence(root, action.provenance, where)])
            changed = current[action.note]
            assert changed is not None
            current[action.note] = changed.model_copy(update={"body": f"{found.body.rstrip()}\n\n{action.text.strip()}\n"})
        elif isinstance(action, SupersedeNote):
            create(action.by, action.title, action.text, "candidate", action, [action.note])
            revise(found, "superseded", action.provenance, status="superseded", superseded_by=action.by)
        else:
            revise(found, "withdraw", action.provenance, status="withdrawn", withdrawn_because=action.reason)
    written = {s.note for s in steps}
    writes = {store.note(delta.project, i): notes.render(n) for i, n in current.items() if n is not None and i in written}
    bases = {}
    for step in steps:
        bases.setdefault(step.note, step.from_revision)
    return Plan(project=delta.project, steps=steps, writes=writes, new_sources=new_sources, bases=bases)


def apply(root: Path, store: Store, plan: Plan) -> None:
    """Write the notes, then list the new ones in sources.yml (keeping its comments), under the
    project's write lock; DeltaRefused, with nothing written, when a note is no longer at the
    revision it was planned against (another delta was applied between the plan and now)."""
    from ..engine import atomic_write
    from ..store.sources import Source, add
    from ..store.writelock import editing

    with editing(root / store.project(plan.project)):
        for note_id, base in plan.bases.items():
            try:
                found = notes.read(root, store, plan.project, note_id)
            except NoteError as exc:
                raise DeltaRefused(str(exc)) from None
            revision = 0 if found is None else found.header.revision
            if revision != base:
                raise DeltaRefused(
                    f"note {note_id} is at revision {revision}, but the delta was written against revision {base} "
                    f"(another change was applied meanwhile): nothing was applied; re-read the note (its current "
                    f"text follows) and write the delta again against revision {revision}",
                    None if found is None else notes.render(found), note_id, revision)
        for path, text in plan.writes.items():
            atomic_write(root / path, text.encode())
        for note_id in plan.new_sources:
            add(root / store.sources_file(plan.project),
                Source(id=note_id, path=store.note(plan.project, note_id), kind="note"))


def plan_and_apply(root: Path, store: Store, delta: Delta) -> Plan:
    """Plan the delta and apply it under the project's write lock, so that what it was checked
    against is what it changes (a compare-and-swap on each note's revision); DeltaRefused when it
    cannot be applied."""
    from ..store.writelock import editing

    with editing(root / store.project(delta.project)):
        plan = plan_delta(root, store, delta)
        apply(root, store, plan)
    return plan


def parse_delta(text: str | bytes, where: str) -> Delta:
    import json

    from pydantic import ValidationError

    from ..store.sources import one_line

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadDelta(f"{where} is not JSON ({exc}); see docs/learning.md for the format") from None
    if isinstance(data, dict) and data.get("schema") not in (None, SCHEMA):
        raise BadDelta(f"{where} has schema {data.get('schema')!r}; this kbuild reads {SCHEMA}")
    try:
        return Delta.model_validate(data)
    except ValidationError as exc:
        raise BadDelta(f"{where}: {one_line(exc)}") from None


def plan_delta(root: Path, store: Store, delta: Delta) -> Plan:
    """The plan of a delta over the project's notes and sources.yml as they are."""
    from ..store.sources import SourcesError, parse

    sources_file = root / store.sources_file(delta.project)
    if not sources_file.is_file():
        raise DeltaRefused(f"there is no project {delta.project!r} ({store.sources_file(delta.project)} is missing); "
                           f"create it with `kbuild add {delta.project} PATH`")
    try:
        listed = set(parse(sources_file.read_bytes(), store.sources_file(delta.project)).ids)
    except SourcesError as exc:
        raise DeltaRefused(str(exc)) from None
    return plan(root, store, delta, listed)


def learn_answer(plan: Plan, applied: bool) -> dict[str, object]:
    """What `kbuild learn --json` and the MCP tool answer (schema kbuild.learn/1)."""
    return {"schema": "kbuild.learn/1", "project": plan.project, "applied": applied,
            "steps": [s.model_dump() for s in plan.steps]}
