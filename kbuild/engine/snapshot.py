"""The no-op fast path: what the last build left settled, and what changed since.

When a build leaves every query settled it records the files read and the outputs written with
their hashes (and stats); the next build stats those files, as `git status` does, and does not
read the graph at all when none changed.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from .buildstate import LOCK_FILES, BuildState
from .hashing import hash_bytes
from .lockfile import LockError, entries_that_differ, lock_entries, parse_entry, render_lock
from .lockfiles import key_of
from .state import FileRead, Memo, State, flat
from .verify import ValuesNow, walk_reads

CLEAN = "clean"  # meta key: what the last build settled, for the no-op fast path
EMPTY_LOCK = render_lock({})  # what a lock file that is not there holds
TAKEN = "lock.taken"  # in the state folder: hard links to the lock files this state describes, by name


@dataclass
class CleanRecord:
    """What a build that left every query settled recorded (the state's meta CLEAN): the one
    record of "nothing changed" the engine keeps, which the next build holds the files against."""

    targets: str  # the hash of the target ids it was built for
    fingerprints: dict[str, str]  # rule -> the fingerprint its memos were made with
    files: dict[str, str]  # each file read -> its hash
    outputs: dict[str, str]  # each output written -> its hash
    queries: int  # how many queries it left settled
    stats: dict[str, list[int]] = field(default_factory=dict)  # the stat each had with that hash, where known

    @classmethod
    def parse(cls, blob: str) -> CleanRecord:
        d = json.loads(blob)
        return cls(d["targets"], d["fingerprints"], d["files"], d["outputs"], d["queries"], d.get("stats", {}))

    @classmethod
    def read(cls, state: State) -> CleanRecord | None:
        blob = state.get_meta(CLEAN)
        return None if blob is None else cls.parse(blob)

    def save(self, state: State) -> None:
        state.set_meta(CLEAN, json.dumps(vars(self)))

    def settled_stats(self) -> dict[str, list[int]] | None:
        """The stat of every file recorded, when one is known for each."""
        return self.stats if len(self.stats) == len(self.files.keys() | self.outputs.keys()) else None


@dataclass(frozen=True)
class StatPass:
    """What one look at the files found by their stat alone: each path that had the stat the
    clean summary recorded with its hash, as (hash, stat). A build that the same command starts
    at once, after its look for hand edits, takes these as they were and stats only the rest:
    one stat pass per command, not two. A path counts only while the summary still pairs that
    hash with that stat (a pull taken in between changes both). The summary the look parsed
    comes along, handed to the one build that takes the pass (which changes it as it goes)."""

    unchanged: dict[str, tuple[str, list[int]]]
    summary: tuple[str, CleanRecord] | None = None  # (as recorded, parsed)

    def parsed(self, blob: str) -> CleanRecord | None:
        """The summary parsed from `blob`, if it is the one this pass looked against."""
        return self.summary[1] if self.summary is not None and self.summary[0] == blob else None


def _targets_digest(root_ids: list[str]) -> str:
    return hash_bytes("\n".join(sorted(root_ids)).encode())


class Snapshot:
    """The record of a build that left every query settled, and the look at what changed since."""

    def __init__(self, db: BuildState) -> None:
        self.db = db
        self.stat_pass = StatPass({})  # what the last look at the files found unchanged by their stat
        self.restatted = False  # that look found a file with its content as recorded and another stat

    def clean_summary(self, root_ids: list[str], earlier: StatPass | None = None) -> CleanRecord | None:
        """What the last build recorded when it left every query settled, if it still describes
        this build: the same lock, targets and rules (parsed by `earlier`, when it parsed it)."""
        if self.db.lock_behind or (self.db.lock_changed and self.db.read_only):
            return None
        blob = self.db.state.get_meta(CLEAN)
        if blob is None:
            return None
        summary = (earlier.parsed(blob) if earlier is not None else None) or CleanRecord.parse(blob)
        if summary.targets != _targets_digest(root_ids):
            return None
        rules = self.db.engine.rules
        for name, fingerprint in summary.fingerprints.items():
            r = rules.get(name)
            if r is None or r.fingerprint_with(self.db.sources) != fingerprint:
                return None
        if self.db.lock_changed and not self._take_lock_difference(summary, root_ids):
            return None
        return summary

    def _take_lock_difference(self, summary: CleanRecord, root_ids: list[str]) -> bool:
        """A new lock (a pull) taken in by what differs from the lock this state describes: the
        two compared entry by entry as bytes, only the entries that differ parsed, the state and
        the summary changed for those alone, so the build goes on as after any edit of a few
        files. False, with nothing changed, wherever that does not clearly hold (the old lock is
        not at hand, an entry is refused, its rule is not this code's, or the new entries do not
        agree with the ones kept), and the build reads the whole lock as it always did."""
        try:
            recorded: dict[str, str] = json.loads(self.db.state.get_meta(LOCK_FILES) or "{}")
            now = self.db.lock_digests()
        except (ValueError, LockError):
            return False
        changed_files = sorted(name for name in recorded.keys() | now.keys() if recorded.get(name) != now.get(name))
        if not recorded or not changed_files:
            return False  # a state from before the files were recorded, or the layout changed: read it whole
        found = self._entries_that_differ(changed_files, recorded, now)
        if found is None:
            return False
        new, gone_from = found
        removed = [q for q in gone_from if q not in new]
        if 4 * (len(new) + len(removed)) > max(summary.queries, 1) or any(q in removed for q in root_ids):
            return False  # most of it: reading the whole lock costs no more
        try:
            incoming = {q: parse_entry(entry) for q, entry in new.items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return False
        before = self.db.state.load_memos([*incoming, *removed])
        touched = self._files_read_anew(incoming, set(removed), before)
        if touched is None:
            return False
        self._take(summary, incoming, removed, before, touched)
        self.db.remember_lock_digests(now)
        self.db.lock_changed = False
        return True

    def _entries_that_differ(self, changed_files: list[str], recorded: dict[str, str],
                             now: dict[str, str]) -> tuple[dict[str, bytes], set[str]] | None:
        """The entries the changed lock files hold that differ from the ones taken before, by id,
        and the ids they no longer hold (an entry may have moved to another file); None when
        that cannot be told from the files alone."""
        hasher, lock = self.db.hasher, self.db.engine.lock
        new: dict[str, bytes] = {}
        gone_from: set[str] = set()
        taken = self.db.engine.state_dir / TAKEN
        for name in changed_files:  # only the files that changed are read, the old ones from the state folder
            file = lock.path.parent / name
            try:
                old_data = new_data = EMPTY_LOCK
                if name in recorded:
                    old_data = (taken / name).read_bytes()
                    if hash_bytes(old_data) != recorded[name]:
                        return None
                if name in now:
                    new_data = hasher.read(hasher.key(file))[0]
            except OSError:
                return None
            found = entries_that_differ(old_data, new_data)
            if found is None or not new.keys().isdisjoint(found[0]):
                return None
            if name in now and (lock.split or file != lock.path):  # else every entry's place is kbuild.lock
                entries = lock_entries(new_data)
                if entries is None or any((key := key_of(q)) is None or lock.file_for(key) != file for q in entries):
                    return None  # an entry the layout puts elsewhere: the lock is written whole
            new.update(found[0])
            gone_from |= found[1]
        return new, gone_from

    def _files_read_anew(self, incoming: dict[str, Memo], gone: set[str],
                         before: dict[str, Memo]) -> dict[str, str | None] | None:
        """Each file the replaced and new entries read, with the hash the new ones read it at
        (None: only a replaced one read it); None when the new entries cannot be taken in alone:
        a rule not this code's, an output that would be refused, or reads that disagree with
        the entries kept."""
        state, engine = self.db.state, self.db.engine
        for memo in incoming.values():
            r = engine.rules.get(memo.rule)
            if r is None or r.fingerprint_with(self.db.sources) != memo.fingerprint:
                return None
            if any(engine.outputs.problem(p, resolve=False) for p in memo.outputs):
                return None  # refused: the whole lock's import says so
        # the entries kept must agree with the new ones: what they read is what the new entries hold
        kept_deps = {d for m in incoming.values() for d, _ in flat(m.deps)
                     if not isinstance(d, FileRead) and d not in incoming}
        kept = state.load_memos(kept_deps) if kept_deps else {}

        def entry(dep: str) -> Memo | None:
            return None if dep in gone else incoming.get(dep) or kept.get(dep)

        def entry_hash(dep: str) -> str | None:
            found = entry(dep)
            return None if found is None else found.hash

        def entry_parts(dep: str) -> dict[str, str] | None:
            found = entry(dep)
            return None if found is None else found.parts

        # each query read held against the entries as they will be; the files read apart, below
        now = ValuesNow(None, entry_hash, entry_parts)
        if any(walk_reads(memo.deps, now).changed for memo in incoming.values()):
            return None
        readers = state.readers([*incoming, *gone]) - incoming.keys() - gone
        for reader in state.load_memos(readers).values():
            reads = [(dep, recorded) for dep, recorded in flat(reader.deps) if dep in gone or dep in incoming]
            if walk_reads((reads,), now).changed:
                return None
        produced = {p for m in incoming.values() for p in m.outputs}
        for memo in before.values():  # an output no entry makes any more is gone from the tree
            if any(p not in produced and os.path.lexists(engine.root / p) for p in memo.outputs):
                return None
        touched: dict[str, str | None] = {}
        for memo in before.values():
            touched.update((d.path, None) for d, _ in flat(memo.deps) if isinstance(d, FileRead))
        for memo in incoming.values():
            for dep, recorded in flat(memo.deps):
                if isinstance(dep, FileRead):
                    if touched.get(dep.path) not in (None, recorded):
                        return None  # two new entries read one file as two contents
                    touched[dep.path] = recorded
        read_anew = {path: digest for path, digest in touched.items() if digest is not None}
        file_readers = state.readers(FileRead.of(path) for path in read_anew) - incoming.keys() - gone
        for reader in state.load_memos(file_readers).values():  # a kept entry read such a file as it was
            if any(isinstance(d, FileRead) and read_anew.get(d.path, recorded) != recorded
                   for d, recorded in flat(reader.deps)):
                return None
        return touched

    def _take(self, summary: CleanRecord, incoming: dict[str, Memo], removed: list[str],
              before: dict[str, Memo], touched: dict[str, str | None]) -> None:
        """Replace the differing entries in the state, and bring the summary up to date with them."""
        state = self.db.state
        files, outputs, stats = summary.files, summary.outputs, summary.stats
        for memo in before.values():
            for path in memo.outputs:
                outputs.pop(path, None)
        state.delete_memos([*incoming, *removed])
        for memo in incoming.values():
            state.save_memo(memo, None)
            outputs.update(memo.outputs)
            summary.fingerprints.setdefault(memo.rule, memo.fingerprint)
        for path, recorded in touched.items():
            stats.pop(path, None)
            if recorded is not None:
                files[path] = recorded
            elif state.readers([FileRead.of(path)]):
                pass  # still read by an entry kept, as the summary says
            else:
                files.pop(path, None)
        for memo in incoming.values():
            for path in memo.outputs:
                stats.pop(path, None)
        summary.queries += len(incoming.keys() - before.keys()) - len(removed)
        summary.save(state)

    def _remember_lock(self) -> None:
        """Link each lock file this state now describes into the state folder, where a later
        build that finds another lock (a pull) compares the files that changed with them
        (_take_lock_difference). A link costs no copy: a lock file is replaced, never written in
        place, by kbuild and by git; an edit in place shows as a hash that is not the one
        recorded. Where links cannot be made, every new lock is read whole, as before."""
        lock, taken = self.db.engine.lock, self.db.engine.state_dir / TAKEN
        try:
            if os.path.isfile(taken):  # a single link, as a kbuild before the split lock made it
                os.unlink(taken)
            files = lock.present()
            linked = {lock.name(f) for f in files}
            for file in files:
                link = taken / lock.name(file)
                with contextlib.suppress(FileNotFoundError):
                    if os.stat(link).st_ino == os.stat(file).st_ino:
                        continue
                link.parent.mkdir(parents=True, exist_ok=True)
                tmp = link.with_name(link.name + ".tmp")
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                os.link(file, tmp)
                os.replace(tmp, link)
            for old in taken.rglob("*"):  # a shard removed since
                if old.is_file() and old.relative_to(taken).as_posix() not in linked:
                    old.unlink()
        except (OSError, LockError):
            pass

    def changed_since(self, summary: CleanRecord, earlier: StatPass | None = None) -> tuple[list[str], list[str]]:
        """The files read and the outputs written that changed since the summary: a stat per
        file, as `git status` does, and not the graph (nor the stat cache, when each file still
        has the stat the summary recorded with its hash); none for what `earlier` found so.
        What this look found by stat alone is left in `self.stat_pass`."""
        hasher, stats = self.db.hasher, summary.stats
        known = earlier.unchanged if earlier is not None else {}
        unchanged: dict[str, tuple[str, list[int]]] = {}
        self.stat_pass = StatPass(unchanged)
        self.restatted = False

        def changed(path: str, digest: str) -> bool:
            recorded = stats.get(path)
            if recorded is not None and (known.get(path) == (digest, recorded)
                                         or hasher.unchanged_since(path, recorded)):
                unchanged[path] = (digest, recorded)
                return False
            now = hasher.hash(path)
            if now == digest and recorded is not None:
                self.restatted = True  # same content, another stat (a checkout, a copy): recorded anew
            return now != digest

        return ([path for path, digest in summary.files.items() if changed(path, digest)],
                [path for path, digest in summary.outputs.items() if changed(path, digest)])

    def _stats_of(self, summary: CleanRecord, paths: Iterable[str] | None = None) -> dict[str, list[int]]:
        """The stat of each file the summary names (of `paths`, if given), where the stat cache
        holds it with that hash."""
        files, outputs, recorded = summary.files, summary.outputs, self.db.hasher.recorded
        found = {}
        for path in files.keys() | outputs.keys() if paths is None else paths:
            entry = recorded(path) if path in files or path in outputs else None
            if entry is not None and entry[1] in (files.get(path), outputs.get(path)):
                found[path] = list(entry[0])
        return found

    def still_clean(self, root_ids: list[str]) -> int | None:
        """The number of queries, when the whole graph is still settled; else None."""
        summary = self.clean_summary(root_ids)
        if summary is None or any(self.changed_since(summary)):
            return None
        return summary.queries

    def complete_stats(self, summary: CleanRecord) -> None:
        """A no-op that had to hash files the summary holds no stat for (outputs a build had just
        written are too new to trust their stats) records their stats now, so the next no-op,
        and `kbuild.uptodate`, need only a stat per file. So does one that found files whose stat
        changed while their content did not (rewritten as they were by a checkout, copied):
        else every no-op after it would hash them again, and kbuild.uptodate never hold."""
        restatted = self.restatted
        if restatted or len(summary.stats) < len(summary.files) + len(summary.outputs):
            stats = self._stats_of(summary)
            if restatted or len(stats) > len(summary.stats):
                summary.stats = stats
                summary.save(self.db.state)
        self._remember_lock()

    def record_clean(self, root_ids: list[str]) -> None:
        if self.db.failed or len(self.db.green) != len(self.db.memos):
            return
        files: dict[str, str] = {}
        outputs: dict[str, str] = {}
        fingerprints: dict[str, str] = {}
        for memo in self.db.memos.values():
            if fingerprints.setdefault(memo.rule, memo.fingerprint) != memo.fingerprint:
                return
            outputs.update(memo.outputs)
            for group in memo.deps:
                for dep, digest in group:
                    if isinstance(dep, FileRead):
                        files[dep.path] = digest
        summary = CleanRecord(_targets_digest(root_ids), fingerprints, files, outputs, len(self.db.memos))
        summary.stats = self._stats_of(summary)
        summary.save(self.db.state)
        self._remember_lock()

    def update_clean(self, summary: CleanRecord, changed_files: list[str], reached: set[str],
                     dead: dict[str, Memo]) -> None:
        """The summary of a build that loaded only what changes reached, brought up to date from
        the memos it replaced and removed, when it too left every query settled."""
        if self.db.failed or any(q not in self.db.green and q not in dead for q in reached):
            return
        files, outputs = summary.files, summary.outputs
        touched = set(changed_files)
        written: set[str] = set()  # the outputs whose recorded hash may have changed
        for old in [*self.db.replaced.values(), *dead.values()]:
            for path in old.outputs:
                outputs.pop(path, None)
            written.update(old.outputs)
            touched |= {d.path for d, _ in flat(old.deps) if isinstance(d, FileRead)}
        for qid in self.db.report.executed:
            if qid in dead:
                continue
            memo = self.db.memos[qid]
            outputs.update(memo.outputs)
            written.update(memo.outputs)
            touched |= {d.path for d, _ in flat(memo.deps) if isinstance(d, FileRead)}
            if memo.rule not in summary.fingerprints:
                summary.fingerprints[memo.rule] = memo.fingerprint
        for path in touched:
            if self.db.state.readers([FileRead.of(path)]):
                files[path] = self.db.hasher.hash(path)
            else:
                files.pop(path, None)
        summary.queries += sum(q not in self.db.replaced for q in self.db.report.executed) - len(dead)
        # a stat stands while the file's hash in the summary and its entry in the stat cache
        # do: only those that this build changed are looked up again, not the whole cache
        stats, again = summary.stats, touched | written | self.db.hasher.restated
        for path in again:
            stats.pop(path, None)
        stats.update(self._stats_of(summary, again))
        summary.save(self.db.state)
        self._remember_lock()
