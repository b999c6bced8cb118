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
"""
from __future__ import annotations

import io
import json
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from . import __version__, notes
from .forgetting import Tombstone, tombstones, write_tombstone
from .store.layout import Store

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
    from .engine import hash_bytes

    return hash_bytes(data)


def export(root: Path, store: Store, project: str, dest: Path, with_raw: bool = False) -> Manifest:
    """Write the bundle of `project` to `dest` (a folder that must not exist, or NAME.tar.gz)."""
    from .checks.secrets import find_secrets
    from .store.sources import SourcesError, parse

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
    manifest: Manifest
    sources: list[SourceDescription]
    facts: list[BundleFact]
    files: dict[str, bytes]


@contextmanager
def _opened(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield path
        return
    if not path.is_file():
        raise BundleError(f"{path} is neither a bundle folder nor an archive; give what `kbuild export` wrote")
    with tempfile.TemporaryDirectory() as folder:
        try:
            with tarfile.open(path, "r:*") as archive:
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(folder, filter="data")  # no links out, no absolute paths, no devices
                else:  # Python before 3.11.4: the same refusals, by hand
                    for member in archive.getmembers():
                        name = PurePosixPath(member.name)
                        if not (member.isfile() or member.isdir()) or name.is_absolute() or ".." in name.parts:
                            raise BundleError(f"{path} holds {member.name!r}, which a bundle never does")
                    archive.extractall(folder)
        except (tarfile.TarError, OSError) as exc:
            raise BundleError(f"{path} is not a bundle archive ({exc})") from None
        yield Path(folder)


def read_bundle(path: Path) -> Bundle:
    """The bundle at `path`, every file checked against the manifest's hashes."""
    with _opened(path) as folder:
        try:
            data = json.loads((folder / "manifest.json").read_text("utf-8"))
        except (OSError, ValueError):
            raise BundleError(f"{path} has no readable manifest.json; give what `kbuild export` wrote") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise BundleError(f"{path} is a bundle of schema {data.get('schema') if isinstance(data, dict) else None!r}"
                              f"; this kbuild ({__version__}) reads {SCHEMA}: export it again with this version")
        try:
            manifest = Manifest.model_validate({**{k: v for k, v in data.items() if k != "schema"}, "schema_": SCHEMA})
        except ValidationError as exc:
            raise BundleError(f"{path}: manifest.json: {exc.errors()[0]['msg']}") from None
        files: dict[str, bytes] = {}
        for rel, digest in manifest.hashes.items():
            if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts:
                raise BundleError(f"{path}: the manifest names {rel!r}, outside the bundle")
            file = folder / rel
            if not file.is_file() or _hash(file.read_bytes()) != digest:
                raise BundleError(f"{path}: {rel} is missing or not what the manifest says (damaged in transit?)")
            files[rel] = file.read_bytes()
    try:
        sources = [SourceDescription.model_validate(s) for s in json.loads(files["sources.json"])]
        facts = [BundleFact.model_validate(f) for f in json.loads(files["facts.json"])]
    except (KeyError, ValueError, ValidationError) as exc:
        raise BundleError(f"{path}: sources.json or facts.json is wrong ({exc})") from None
    return Bundle(manifest=manifest, sources=sources, facts=facts, files=files)


class ImportPlan(BaseModel):
    project: str
    add_notes: list[str] = []
    same: list[str] = []  # ids already here with the same hash
    conflicts: list[str] = []  # one line each: same id, another hash, kept for a person
    add_sources: list[str] = []
    missing_sources: list[str] = []  # one line each: what the bundle was built from that cannot be listed
    tombstones: list[str] = []
    facts_same: int = 0
    facts_differ: list[str] = []  # fact ids this store built with other words (another model, another version)
    facts_unbuilt: int = 0  # not built here (yet): the next build makes them
    writes: dict[str, bytes] = {}
    entries: list[dict[str, str]] = []  # sources.yml entries to add


def plan_import(root: Path, store: Store, bundle: Bundle, project: str | None = None) -> ImportPlan:
    from .store.sources import SourcesError, parse

    project = project or bundle.manifest.project
    plan = ImportPlan(project=project)
    for fact in bundle.facts:
        page = root / store.facts_dir(project, fact.source) / f"{PurePosixPath(fact.id).name}.md"
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
    for described in bundle.sources:
        if described.kind == "note":
            continue
        local = here.get(described.id)
        raw_here = root / store.original(project, described.id, described.ext)
        if local is not None:
            got = _hash(raw_here.read_bytes()) if raw_here.is_file() else None
            if described.hash is None or got == described.hash:
                plan.same.append(f"source {described.id}")
            else:
                plan.conflicts.append(f"source {described.id}: this store built it from another copy ({local.origin}); "
                                      "the bundle's is kept out")
            continue
        if described.raw is not None:
            target = f"{store.project(project)}/{IMPORTED}/{described.id}{described.ext}"
            plan.writes[target] = bundle.files[described.raw]
            plan.entries.append({"id": described.id, "path": target, **({"title": described.title} if described.title else {})})
            plan.add_sources.append(f"{described.id} (its copy, to {target})")
        elif described.url is not None:
            plan.entries.append({"id": described.id, "url": described.url, **({"title": described.title} if described.title else {})})
            plan.add_sources.append(f"{described.id} ({described.url}, downloaded by the next build)")
        elif described.path is not None and (root / described.path).is_file() and \
                _hash((root / described.path).read_bytes()) == described.hash:
            plan.entries.append({"id": described.id, "path": described.path, **({"title": described.title} if described.title else {})})
            plan.add_sources.append(f"{described.id} ({described.path}, the same file here)")
        else:
            plan.missing_sources.append(f"source {described.id}: {described.path or described.url} is not here with the "
                                        "content the bundle was built from; copy it in, or export with --raw")
    local_stones = {t.id: t for t in tombstones(root, store, project)}
    for path, data in sorted(bundle.files.items()):
        if not path.startswith("notes/"):
            continue
        note_id = PurePosixPath(path).stem
        try:
            notes.parse(data, path)
        except notes.NoteError as exc:
            raise BundleError(f"the bundle's {exc}") from None
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
        plan.entries.append({"id": note_id, "path": store.note(project, note_id), "kind": "note"})
        plan.add_notes.append(note_id)
    if "tombstones.yml" in bundle.files:
        from ruamel.yaml import YAML

        for entry in YAML(typ="safe", pure=True).load(bundle.files["tombstones.yml"].decode()) or []:
            stone = Tombstone.model_validate(entry)
            if stone.id in local_stones:
                continue
            if (root / store.note(project, stone.id)).is_file():
                plan.conflicts.append(f"note {stone.id}: forgotten in the bundle, kept here; `kbuild forget "
                                      f"{project}/{stone.id}` if it should go")
            else:
                plan.tombstones.append(stone.id)
    return plan


def apply_import(root: Path, store: Store, bundle: Bundle, plan: ImportPlan) -> None:
    from ruamel.yaml import YAML

    from .engine import atomic_write
    from .store.sources import NEW_PROJECT, Source, add

    sources_file = root / store.sources_file(plan.project)
    if not sources_file.exists():
        sources_file.parent.mkdir(parents=True, exist_ok=True)
        sources_file.write_text(NEW_PROJECT, "utf-8")
    for path, data in plan.writes.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(root / path, data)
    for entry in plan.entries:
        add(sources_file, Source.model_validate(entry))
    if plan.tombstones:
        for entry in YAML(typ="safe", pure=True).load(bundle.files["tombstones.yml"].decode()) or []:
            stone = Tombstone.model_validate(entry)
            if stone.id in plan.tombstones:
                write_tombstone(root, store, plan.project, stone)
