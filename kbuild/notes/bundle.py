"""Bundles: one project's knowledge as a folder (or a .tar.gz) that travels to another store.

    BUNDLE/
      manifest.json        kbuild.bundle/1: kbuild's version, the project, counts, every file's hash
      sources.json         each source described: id, kind, path or url, title, the hash of its copy
      facts.json           each fact by its stable id (SOURCE/SLUG) with its hash and provenance
      facts/SOURCE/SLUG.md the fact pages, as built (redacted: a page never holds a secret)
      notes/ID.md          the notes, with their status, history and relations (front matter)
      tombstones.yml       what was forgotten: ids and sentence hashes, no words
      raw/SOURCE/original.EXT  the sources' copies, only with --raw (and never one holding a secret)

`import` merges by id and hash: what the store lacks is added, what it has with the same hash is
left alone, and the same id with another hash is a conflict, kept for a person to decide (a
note's other version lands in notes/conflicts/, never over the local one). It writes inside the
store only: notes, tombstones, sources.yml entries, and the raw copies it brings, in
kb/PROJECT/imported/. Facts are never written: the build makes them, and the bundle's hashes
say whether it made the same.

A bundle comes from elsewhere, so it is data and nothing more: every name it carries passes
the id check `kbuild add` makes, every file it writes lies inside kb/PROJECT/ (as a build's
outputs lie inside the store), every note it brings passes the checks `kbuild learn` makes of
a delta, and the import is whole or nothing (staged inside kb/PROJECT/, then moved into place,
what was moved taken back when a move fails).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from .. import __version__
from . import note as notes
from ..engine.files import TEMP_SUFFIX, OutputArea, PathEscapesRoot
from .forgetting import Tombstone, tombstones, write_tombstone
from .note import Note
from ..store.layout import BadId, Store, check_id
from ..store.sources import Source

SCHEMA = "kbuild.bundle/1"
IMPORTED = "imported"  # kb/PROJECT/imported/: raw copies a bundle brought, listed by path


class BundleError(ValueError):
    """One line: what is wrong with the bundle or the export, and what to do."""


class SourceDescription(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["document", "note"]
    path: str | None = None
    url: str | None = None
    title: str | None = None
    ext: str
    hash: str | None  # of the raw copy it was built from (None: never built)
    bytes: int | None = None
    raw: str | None = None  # where the bundle holds its copy, with --raw


class BundleFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str  # SOURCE/SLUG: the page's name, stable across edits of its words
    source: str
    path: str  # in the bundle
    hash: str
    provenance: str  # the page's first line: its source, pages and lines


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = "kbuild.bundle/1"
    kbuild: str
    project: str
    counts: dict[str, int]
    hashes: dict[str, str]  # every file of the bundle but the manifest, by its path

    def dump(self) -> str:
        data = self.model_dump()
        data = {"schema": data.pop("schema_"), **data}
        return json.dumps(data, indent=2, sort_keys=False) + "\n"


def _hash(data: bytes) -> str:
    from ..engine import hash_bytes

    return hash_bytes(data)


def export(root: Path, store: Store, project: str, dest: Path, with_raw: bool = False) -> Manifest:
    """Write the bundle of `project` to `dest` (a folder that must not exist, or NAME.tar.gz)."""
    from ..text.secrets import find_secrets
    from ..store.sources import SourcesError, parse

    sources_file = root / store.sources_file(project)
    if not sources_file.is_file():
        raise BundleError(f"there is no project {project!r} ({store.sources_file(project)} is missing)")
    try:
        listed = parse(sources_file.read_bytes(), store.sources_file(project))
    except SourcesError as exc:
        raise BundleError(str(exc)) from None
    if dest.exists():
        raise BundleError(f"{dest} exists; give a new folder or archive name")
    files: dict[str, bytes] = {}
    described = []
    for source in listed.sources:
        raw = root / store.original(project, source.id, source.ext)
        data = raw.read_bytes() if raw.is_file() else None
        entry = SourceDescription(id=source.id, kind=source.kind, path=source.path, url=source.url, title=source.title,
                                  ext=source.ext, hash=_hash(data) if data is not None else None,
                                  bytes=len(data) if data is not None else None)
        if source.kind == "note":
            if data is not None and (root / store.note(project, source.id)).is_file():
                files[f"notes/{source.id}.md"] = (root / store.note(project, source.id)).read_bytes()
        elif with_raw and data is not None and not find_secrets(data.decode("utf-8", errors="replace")):
            entry.raw = f"raw/{source.id}/original{source.ext}"
            files[entry.raw] = data
        described.append(entry)
    facts = []
    for source in listed.sources:
        folder = root / store.facts_dir(project, source.id)
        for page in sorted(folder.glob("*.md")) if folder.is_dir() else []:
            if page.name in ("index.md", "text.md"):
                continue
            data = page.read_bytes()
            at = f"facts/{source.id}/{page.name}"
            files[at] = data
            facts.append(BundleFact(id=f"{source.id}/{page.stem}", source=source.id, path=at, hash=_hash(data),
                                    provenance=data.decode("utf-8", errors="replace").split("\n", 1)[0]))
    stones = tombstones(root, store, project)
    if stones:
        files["tombstones.yml"] = (root / store.tombstones(project)).read_bytes()
    files["sources.json"] = (json.dumps([d.model_dump() for d in described], indent=2) + "\n").encode()
    files["facts.json"] = (json.dumps([f.model_dump() for f in facts], indent=2) + "\n").encode()
    manifest = Manifest(kbuild=__version__, project=project, hashes={p: _hash(d) for p, d in sorted(files.items())},
                        counts={"sources": sum(1 for d in described if d.kind == "document"),
                                "notes": sum(1 for p in files if p.startswith("notes/")), "facts": len(facts),
                                "tombstones": len(stones), "raw": sum(1 for p in files if p.startswith("raw/"))})
    files["manifest.json"] = manifest.dump().encode()
    if dest.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(dest, "w:gz") as archive:
            for path, data in sorted(files.items()):
                info = tarfile.TarInfo(path)
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                archive.addfile(info, io.BytesIO(data))
    else:
        for path, data in files.items():
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(data)
    return manifest


class Bundle(BaseModel):
    where: str  # the bundle as the user named it, for messages
    manifest: Manifest
    sources: list[SourceDescription]
    facts: list[BundleFact]
    notes: dict[str, Note]  # by id, parsed from notes/ID.md
    tombstones: list[Tombstone]
    files: dict[str, bytes]


@contextmanager
def _opened(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield path
        return
    if not path.is_file():
        raise BundleError("it is neither a bundle folder nor an archive; give what `kbuild export` wrote")
    with tempfile.TemporaryDirectory() as folder:
        try:
            with tarfile.open(path, "r:*") as archive:
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(folder, filter="data")  # no links out, no absolute paths, no devices
                else:  # Python before 3.11.4: the same refusals, by hand
                    for member in archive.getmembers():
                        name = PurePosixPath(member.name)
                        if not (member.isfile() or member.isdir()) or name.is_absolute() or ".." in name.parts:
                            raise BundleError(f"it holds {member.name!r}, which a bundle never does")
                    archive.extractall(folder)
        except (tarfile.TarError, OSError) as exc:
            raise BundleError(f"it is not a bundle archive ({exc})") from None
        yield Path(folder)


def _id(kind: str, value: str, where: str) -> str:
    """`value` as an id of `kind`, by the check `kbuild add` makes; BundleError naming where it is."""
    try:
        return check_id(kind, value)
    except BadId as exc:
        raise BundleError(f"{where}: {exc}") from None


def _kept_ext(ext: str) -> bool:
    """Whether `ext` is an extension a source's raw copy keeps (what Source.ext gives): nothing
    else may end the name of a file the import writes."""
    return Source(id="x", path=f"x{ext}").ext == ext


def _check_file_name(rel: str) -> None:
    """A file a bundle holds, named as `export` names it, or BundleError."""
    parts = rel.split("/")
    if rel in ("sources.json", "facts.json", "tombstones.yml"):
        return
    if len(parts) == 2 and parts[0] == "notes" and parts[1].endswith(".md"):
        _id("note", parts[1].removesuffix(".md"), f"note file {rel}")
    elif len(parts) == 3 and parts[0] == "facts" and parts[2].endswith(".md"):
        _id("source", parts[1], f"fact file {rel}")
        _id("fact", parts[2].removesuffix(".md"), f"fact file {rel}")
    elif len(parts) == 3 and parts[0] == "raw" and parts[2].startswith("original") and \
            _kept_ext(parts[2].removeprefix("original")):
        _id("source", parts[1], f"raw file {rel}")
    else:
        raise BundleError(f"the manifest names {rel!r}, which no bundle holds (sources.json, facts.json, "
                          "tombstones.yml, notes/ID.md, facts/SOURCE/SLUG.md, raw/SOURCE/original.EXT)")


def _check_sources(described: list[SourceDescription], files: dict[str, bytes]) -> None:
    """Every source the bundle describes: an id `kbuild add` takes, listed once, an extension a
    copy keeps, a path that stays inside a project, a url the fetcher takes, its copy where
    `export` puts it."""
    from ..store.sources import check_url

    seen: set[str] = set()
    for d in described:
        where = f"sources.json: source {d.id!r}"
        _id("source", d.id, "sources.json")
        if d.id in seen:
            raise BundleError(f"{where} is listed twice; a bundle lists each source once")
        seen.add(d.id)
        if not _kept_ext(d.ext):
            raise BundleError(f"{where}: ext {d.ext!r} is not an extension ('.' and up to 9 letters or digits)")
        if d.path is not None:
            path = PurePosixPath(d.path)
            if path.is_absolute() or ".." in path.parts or "\0" in d.path:
                raise BundleError(f"{where}: path {d.path!r} must be relative and inside the project")
        if d.url is not None:
            try:
                check_url(d.url)
            except ValueError as exc:
                raise BundleError(f"{where}: {exc}") from None
        if d.raw is not None and (d.raw != f"raw/{d.id}/original{d.ext}" or d.raw not in files):
            raise BundleError(f"{where}: raw {d.raw!r} is not its copy in the bundle (raw/{d.id}/original{d.ext})")
    copies = {d.raw for d in described}
    for rel in files:
        if rel.startswith("raw/") and rel not in copies:
            raise BundleError(f"the bundle holds {rel}, the copy of no source sources.json describes")


def _check_facts(facts: list[BundleFact], files: dict[str, bytes]) -> None:
    seen: set[str] = set()
    for fact in facts:
        where = f"facts.json: fact {fact.id!r}"
        _id("source", fact.source, where)
        name = fact.id.removeprefix(f"{fact.source}/")
        _id("fact", name, where)
        if fact.id in seen:
            raise BundleError(f"{where} is listed twice")
        seen.add(fact.id)
        if fact.path != f"facts/{fact.source}/{name}.md" or fact.path not in files:
            raise BundleError(f"{where}: path {fact.path!r} is not its page in the bundle "
                              f"(facts/{fact.source}/{name}.md)")


def _read_notes(described: list[SourceDescription], files: dict[str, bytes]) -> dict[str, Note]:
    documents = {d.id for d in described if d.kind == "document"}
    found = {}
    for rel, data in sorted(files.items()):
        if not rel.startswith("notes/"):
            continue
        note_id = rel.removeprefix("notes/").removesuffix(".md")
        try:
            note = notes.parse(data, rel)
        except notes.NoteError as exc:
            raise BundleError(str(exc)) from None
        if note.header.id != note_id:
            raise BundleError(f"{rel} says it is note {note.header.id!r}; a note's file is named by its id")
        if note_id in documents:
            raise BundleError(f"{rel}: sources.json lists {note_id!r} twice, as a note and as a document")
        found[note_id] = note
    return found


def _read_tombstones(files: dict[str, bytes]) -> list[Tombstone]:
    if "tombstones.yml" not in files:
        return []
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from ..store.sources import one_line

    try:
        entries = YAML(typ="safe", pure=True).load(files["tombstones.yml"].decode("utf-8")) or []
        stones = [Tombstone.model_validate(entry) for entry in entries] if isinstance(entries, list) else None
    except (YAMLError, UnicodeDecodeError) as exc:
        raise BundleError(f"tombstones.yml is not valid YAML ({str(exc).splitlines()[0]})") from None
    except ValidationError as exc:
        raise BundleError(f"tombstones.yml: {one_line(exc)}") from None
    if stones is None:
        raise BundleError("tombstones.yml is not a list of tombstones")
    for stone in stones:
        _id("note", stone.id, "tombstones.yml: tombstone")
    return stones


def read_bundle(path: Path) -> Bundle:
    """The bundle at `path`, every file checked against the manifest's hashes and every name it
    carries checked as `kbuild add` checks ids: BundleError, one line, for the first that fails."""
    try:
        return _read_bundle(path)
    except BundleError as exc:
        raise BundleError(f"{path}: {exc}; nothing was imported") from None


def _read_bundle(path: Path) -> Bundle:
    with _opened(path) as folder:
        try:
            data = json.loads((folder / "manifest.json").read_text("utf-8"))
        except (OSError, ValueError):
            raise BundleError("it has no readable manifest.json; give what `kbuild export` wrote") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise BundleError(f"it is a bundle of schema {data.get('schema') if isinstance(data, dict) else None!r}"
                              f"; this kbuild ({__version__}) reads {SCHEMA}: export it again with this version")
        try:
            manifest = Manifest.model_validate({**{k: v for k, v in data.items() if k != "schema"}, "schema_": SCHEMA})
        except ValidationError as exc:
            raise BundleError(f"manifest.json: {exc.errors()[0]['msg']}") from None
        _id("project", manifest.project, "manifest.json")
        files: dict[str, bytes] = {}
        inside = folder.resolve()
        for rel, digest in manifest.hashes.items():
            _check_file_name(rel)
            file = folder / rel
            if not file.resolve().is_relative_to(inside):
                raise BundleError(f"{rel} is a link out of the bundle")
            if not file.is_file() or _hash(file.read_bytes()) != digest:
                raise BundleError(f"{rel} is missing or not what the manifest says (damaged in transit?)")
            files[rel] = file.read_bytes()
    try:
        sources = [SourceDescription.model_validate(s) for s in json.loads(files["sources.json"])]
        facts = [BundleFact.model_validate(f) for f in json.loads(files["facts.json"])]
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise BundleError(f"sources.json or facts.json is wrong ({str(exc).splitlines()[0]})") from None
    _check_sources(sources, files)
    _check_facts(facts, files)
    return Bundle(where=str(path), manifest=manifest, sources=sources, facts=facts,
                  notes=_read_notes(sources, files), tombstones=_read_tombstones(files), files=files)


class ImportPlan(BaseModel):
    project: str
    add_notes: list[str] = []
    same: list[str] = []  # ids already here with the same hash
    conflicts: list[str] = []  # one line each: same id, another hash, kept for a person
    add_sources: list[str] = []
    missing_sources: list[str] = []  # one line each: what the bundle was built from that cannot be listed
    tombstones: list[Tombstone] = []
    facts_same: int = 0
    facts_differ: list[str] = []  # fact ids this store built with other words (another model, another version)
    facts_unbuilt: int = 0  # not built here (yet): the next build makes them
    writes: dict[str, bytes] = {}  # path from the root -> the file's new bytes
    entries: list[Source] = []  # sources.yml entries to add


def plan_import(root: Path, store: Store, bundle: Bundle, project: str | None = None) -> ImportPlan:
    """What importing `bundle` into `project` (the bundle's own by default) writes, every note it
    brings checked as `kbuild learn` checks a delta and every file it writes checked to lie inside
    the project's folder of the store. BundleError when any of it cannot be imported."""
    try:
        return _plan_import(root, store, bundle, project)
    except BundleError as exc:
        raise BundleError(f"{bundle.where}: {exc}; nothing was imported") from None


def _plan_import(root: Path, store: Store, bundle: Bundle, project: str | None) -> ImportPlan:
    from .learning import DeltaRefused, check_arriving
    from ..store.sources import SourcesError, parse, resolve_path

    project = project or bundle.manifest.project
    plan = ImportPlan(project=project)
    for note_id, note in bundle.notes.items():
        try:
            check_arriving(root, note, f"note {note_id}")
        except DeltaRefused as exc:
            raise BundleError(str(exc)) from None
    for fact in bundle.facts:
        page = root / store.fact(project, fact.source, fact.id.removeprefix(f"{fact.source}/"))
        if not page.is_file():
            plan.facts_unbuilt += 1
        elif _hash(page.read_bytes()) == fact.hash:
            plan.facts_same += 1
        else:
            plan.facts_differ.append(fact.id)
    sources_file = root / store.sources_file(project)
    try:
        listed = parse(sources_file.read_bytes(), store.sources_file(project)) if sources_file.is_file() else None
    except SourcesError as exc:
        raise BundleError(str(exc)) from None
    here = {s.id: s for s in listed.sources} if listed else {}

    def same_file(path: str, digest: str | None) -> bool:
        try:
            full = resolve_path(root, path)
        except SourcesError:
            return False
        return full.is_file() and _hash(full.read_bytes()) == digest

    for described in bundle.sources:
        if described.kind == "note":
            continue
        local = here.get(described.id)
        if local is not None:
            if described.hash is None or same_file(store.original(project, described.id, described.ext), described.hash):
                plan.same.append(f"source {described.id}")
            else:
                plan.conflicts.append(f"source {described.id}: this store built it from another copy ({local.origin}); "
                                      "the bundle's is kept out")
            continue
        titled = {"title": described.title} if described.title else {}
        if described.raw is not None:
            target = f"{store.project(project)}/{IMPORTED}/{described.id}{described.ext}"
            if (root / target).exists() and not same_file(target, described.hash):
                plan.conflicts.append(f"source {described.id}: {target} is here with other bytes, listed by no "
                                      "source; the bundle's copy is left out (move that file away to import it)")
                continue
            plan.writes[target] = bundle.files[described.raw]
            plan.entries.append(Source(id=described.id, path=target, **titled))
            plan.add_sources.append(f"{described.id} (its copy, to {target})")
        elif described.url is not None:
            plan.entries.append(Source(id=described.id, url=described.url, **titled))
            plan.add_sources.append(f"{described.id} ({described.url}, downloaded by the next build)")
        elif described.path is not None and same_file(described.path, described.hash):
            plan.entries.append(Source(id=described.id, path=described.path, **titled))
            plan.add_sources.append(f"{described.id} ({described.path}, the same file here)")
        else:
            plan.missing_sources.append(f"source {described.id}: {described.path or described.url} is not here with the "
                                        "content the bundle was built from; copy it in, or export with --raw")
    local_stones = {t.id for t in tombstones(root, store, project)}
    for note_id in bundle.notes:
        data = bundle.files[f"notes/{note_id}.md"]
        if note_id in local_stones:
            plan.conflicts.append(f"note {note_id}: forgotten here; the bundle's copy is left out")
            continue
        local = root / store.note(project, note_id)
        if local.is_file():
            if _hash(local.read_bytes()) == _hash(data):
                plan.same.append(f"note {note_id}")
            else:
                kept = f"{store.notes_dir(project)}/conflicts/{note_id}.{_hash(data)[:12]}.md"
                plan.writes[kept] = data
                plan.conflicts.append(f"note {note_id}: another version here; the bundle's is kept in {kept} for a "
                                      "person to decide (supersede, append or delete it)")
            continue
        if note_id in here:
            plan.conflicts.append(f"note {note_id}: this project has a source of that id; the note is left out")
            continue
        plan.writes[store.note(project, note_id)] = data
        plan.entries.append(Source(id=note_id, path=store.note(project, note_id), kind="note"))
        plan.add_notes.append(note_id)
    for stone in bundle.tombstones:
        if stone.id in local_stones or stone.id in {t.id for t in plan.tombstones}:
            continue
        if (root / store.note(project, stone.id)).is_file():
            plan.conflicts.append(f"note {stone.id}: forgotten in the bundle, kept here; `kbuild forget "
                                  f"{project}/{stone.id}` if it should go")
        else:
            plan.tombstones.append(stone)
    area = _area(root, store, project)
    for path in [*plan.writes, store.sources_file(project), store.tombstones(project)]:
        why = area.problem(path)
        if why is not None:
            raise BundleError(why)
    return plan


def _area(root: Path, store: Store, project: str) -> OutputArea:
    """Where an import may write: the project's folder of the store, as a build's outputs are
    confined to the store (never through a symlink out of it)."""
    return OutputArea(root, store.project(project))


class ImportFailed(OSError):
    """Writing the import failed part way (a full disk...): what was written is taken back."""


def apply_import(root: Path, store: Store, plan: ImportPlan) -> None:
    """Write the plan whole or not at all: every file is first written into a folder inside the
    project's folder (on the same file system), then each moved into place; when a move fails,
    the ones before it are taken back. ImportFailed, or BundleError when sources.yml changed
    meanwhile or a path leads out of the project's folder."""
    from ..store.sources import SourcesError
    from ..store.writelock import editing

    area = _area(root, store, plan.project)
    try:
        project_folder = area.path(store.sources_file(plan.project)).parent
    except PathEscapesRoot as exc:
        raise BundleError(f"{exc}; nothing was imported") from None
    made = _missing_folders(project_folder)
    staging: Path | None = None
    committed = False
    try:
        project_folder.mkdir(parents=True, exist_ok=True)
        with editing(project_folder):  # another `add` or `learn` waits: neither write is lost
            staging = Path(tempfile.mkdtemp(prefix=".import.", suffix=TEMP_SUFFIX, dir=project_folder))
            _commit(area, staging, _stage(root, store, plan, staging))
        committed = True
    except (SourcesError, PathEscapesRoot) as exc:
        raise BundleError(f"{exc}; nothing was imported") from None
    except OSError as exc:
        raise ImportFailed(f"could not write the import ({exc.strerror or exc}); nothing was imported: free space "
                           "(or fix the cause) and import again") from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if not committed:
            _remove_empty(made)


def _stage(root: Path, store: Store, plan: ImportPlan, staging: Path) -> list[str]:
    """Write every file the plan changes below `staging`, at its path from the root: the notes and
    copies it brings, sources.yml with its entries added, tombstones.yml with its tombstones.
    The paths written."""
    from ..engine import atomic_write
    from ..store.sources import NEW_PROJECT, add

    for path, data in plan.writes.items():
        atomic_write(staging / path, data)
    listed = store.sources_file(plan.project)
    before = (root / listed).read_bytes() if (root / listed).is_file() else None
    atomic_write(staging / listed, before if before is not None else NEW_PROJECT.encode())
    for entry in plan.entries:
        add(staging / listed, entry)
    staged = [*plan.writes, listed]
    if plan.tombstones:
        if (root / store.tombstones(plan.project)).is_file():
            atomic_write(staging / store.tombstones(plan.project), (root / store.tombstones(plan.project)).read_bytes())
        for stone in plan.tombstones:
            write_tombstone(staging, store, plan.project, stone)
        staged.append(store.tombstones(plan.project))
    now = (root / listed).read_bytes() if (root / listed).is_file() else None
    if now != before:  # another command listed a source meanwhile: its entry would be lost
        raise BundleError(f"{listed} changed while importing; nothing was imported: run the import again")
    return staged


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and those above it that do not exist yet, deepest first: what a failed import
    removes again."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            continue  # not empty: something else lives there


def _commit(area: OutputArea, staging: Path, paths: list[str]) -> None:
    """Move each staged file to its place in the store, keeping a copy of the file it replaces;
    when one move fails, put every earlier one back as it was."""
    done: list[tuple[Path, Path | None]] = []
    created: list[Path] = []
    try:
        for path in paths:
            target = area.path(path)
            created += reversed(_missing_folders(target.parent))
            target.parent.mkdir(parents=True, exist_ok=True)
            kept = None
            if target.is_file():
                kept = staging / ".replaced" / path
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(target, kept)
            done.append((target, kept))
            os.replace(staging / path, target)
    except (OSError, PathEscapesRoot):
        for target, kept in reversed(done):
            if kept is not None:
                os.replace(kept, target)
            else:
                target.unlink(missing_ok=True)
        _remove_empty(list(reversed(created)))
        raise
