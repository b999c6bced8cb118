"""Loading the recorded graph: all of it, only what a few changes reach, or from the lock."""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from .buildstate import BuildState
from .snapshot import CLEAN
from .state import FileRead, Memo, PartHash, State, flat


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Objects made inside live for the whole command: the collector is paused while they are
    made and they are frozen out of it after. Loading the graph allocates a million small
    objects, which the cyclic collector would otherwise scan again and again (3 s instead of
    0.5 s at 100k queries)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
    gc.freeze()


class GraphLoading:
    """The recorded graph, loaded whole or only as far as a few changes reach."""

    def __init__(self, db: BuildState) -> None:
        self.db = db
        # When the last build left everything settled and only a few inputs changed, only the
        # queries those changes reach are loaded (`reached`); the rest are settled as recorded.
        self.reached: set[str] | None = None
        # Of those, the ones some unreached queries read only a part of (gates): the queries
        # behind each; the gates not yet settled.
        self.behind_gates: dict[str, set[str]] = {}
        self.open_gates: set[str] = set()

    def load_graph(self) -> None:
        with long_lived():
            self.db.memos = self.db.state.load_memos()
            if self.db.lock_changed:
                self._import_lock()

    def load_reached(self, changed_files: list[str], changed_outputs: list[str], root_ids: list[str]) -> None:
        """Load only the queries that the changed files and outputs reach through the recorded
        graph read backwards; every other query is settled with its recorded hash, which its
        readers recorded too (the last build left every read settled)."""
        with long_lived():
            self._load_reached(changed_files, changed_outputs, root_ids)

    def _load_reached(self, changed_files: list[str], changed_outputs: list[str], root_ids: list[str]) -> None:
        state = self.db.state
        frontier = state.readers(FileRead.of(p) for p in changed_files)
        for writers in state.writers(changed_outputs).values():
            frontier |= writers
        self.reached, self.behind_gates, self.open_gates = set(), {}, set()
        self.db.memos = _LazyMemos(state)
        self._extend_reach(frontier)
        reached, behind = self.reached, self.behind_gates
        for qid in root_ids:
            memo = self.db.memos.get(qid) if qid not in reached and qid not in behind else None
            if memo is not None:
                self.db.green[qid] = memo.hash

    def gate_open(self, source: str) -> bool:
        """Whether `source`, a reached query some unreached queries read parts of, is still to
        be settled. Once it is, the readers of the parts that changed (or all of them, if it
        failed) and what they reach join the reach; the others are as they were recorded."""
        if source not in self.open_gates:
            return False
        if source not in self.db.green and source not in self.db.failed:
            return True
        self.open_gates.discard(source)
        before = self.db.replaced.get(source)
        if source in self.db.failed:
            through = self.db.state.part_readers(source)
        elif before is None:
            through = set()  # not run: every part is as it was
        else:
            now = self.db.memos[source].parts
            through = self.db.state.part_readers(source, [p for p in before.parts.keys() | now.keys()
                                                       if before.parts.get(p) != now.get(p)])
        self._extend_reach(through)
        return False

    def _extend_reach(self, frontier: set[str]) -> None:
        """Put `frontier` in the reach, with what reads it whole, directly or not.

        A query put there that others read only a part of is a gate: whether the change goes
        through depends on whether that part changed, known once the gate is settled
        (`gate_open`). Until then the queries behind it wait, and nothing else does. The set
        behind a gate comes from the state, walked over the whole recorded graph, reached
        queries too: the queries it adds lie behind a gate anyway, and wait a little longer. A
        gate settled later may let a change through to another query that others read in parts:
        that one is a gate like the first."""
        state, reached = self.db.state, self.reached
        assert reached is not None
        added: set[str] = set()
        frontier = frontier - reached
        while frontier:
            reached |= frontier
            added |= frontier
            frontier = state.whole_readers(frontier) - reached
        self.db.memos.update(state.load_memos(added - self.db.memos.keys()))
        behind = self.behind_gates
        for gate in state.read_in_parts(added):
            waiting = state.behind(gate) - reached
            if waiting:
                self.open_gates.add(gate)
            for qid in waiting:
                behind.setdefault(qid, set()).add(gate)
        # What the queries put in the reach read that no change reaches, nor lies behind a gate,
        # is as recorded: settled here, where one by one each would load its memo.
        green = self.db.green
        for qid in added:
            for dep, recorded in flat(self.db.memos[qid].deps):
                # a part read recorded the hash of one part, not the value's: the query is
                # settled from its own memo when it is demanded
                if (dep not in reached and dep not in behind and not isinstance(dep, FileRead)
                        and PartHash.part_of(recorded) is None):
                    green[dep] = recorded

    def behind_open_gate(self, qid: str) -> list[str]:
        """The gates `qid` lies behind that are not settled yet (none: settled as recorded, unless
        a change came through one and put it in the reach)."""
        found: list[str] = []
        looked: set[str] = set()
        # A gate settled here may put it behind another (`_extend_reach`): looked at in turn.
        while (sources := self.behind_gates.get(qid, set()) - looked):
            looked |= sources
            found += [s for s in sources if self.gate_open(s)]
        return found

    def _import_lock(self) -> None:
        """Take the graph from the lock when it changed under us (a fresh clone, a git pull).

        An entry naming an output where no output may be (outside the outputs' folder, in .git,
        the lock itself) is refused: a lock is a file anyone can edit in a pull request, and its
        outputs are files a build may remove."""
        lock = self.db.engine.lock
        imported: dict[str, Memo] = {}
        for file, memos in lock.read():
            for qid, memo in memos.items():
                why = next(filter(None, (self.db.engine.outputs.problem(p, resolve=False) for p in memo.outputs)), None)
                may_write = self.db.engine.may_write
                if why is None and may_write is not None:
                    why = next((f"output path {p!r} is not a file rule {memo.rule} writes" for p in memo.outputs
                                if not may_write(memo.rule, p)), None)
                if why is not None:
                    self.db.refused[qid] = (f"{lock.name(file)}: the entry {qid} was ignored: {why}; "
                                         "review the change that brought it")
                    self.db.changed.add(qid)  # the lock is written again without it
                    continue
                placed = lock.file_for(memo.key)
                if placed is not file and placed != file:  # the same object, mostly: Path's == is slow
                    self.db.lock_misplaced = True
                imported[qid] = memo
        if not self.db.read_only:  # a check or a dry run reads the lock; only a build takes it in
            keep = {q for q, m in imported.items() if self.db.memos.get(q) == m}
            self.db.state.replace_memos(imported.values(), keep_values_of=keep)
            # no build here wrote these: removed, each is kept a copy of (Outputs.remove)
            self.db.lock_only_outputs = {p for q, m in imported.items() if q not in keep for p in m.outputs}
            self.db.remember_lock_digests(self.db.lock_digests())
            self.db.state.delete_meta(CLEAN)
        self.db.memos = imported

class _LazyMemos(dict[str, Memo]):
    """Memos loaded from the state when first asked for: a build that loaded only what its
    changes reach can still look up any query it meets."""

    def __init__(self, state: State) -> None:
        super().__init__()
        self.state = state

    def __missing__(self, qid: str) -> Memo:
        found = self.state.load_memos([qid])
        if not found:
            raise KeyError(qid)
        self[qid] = found[qid]
        return found[qid]

    def get(self, qid: str, default: Memo | None = None) -> Memo | None:  # type: ignore[override]
        try:
            return self[qid]
        except KeyError:
            return default

    def __contains__(self, qid: object) -> bool:
        return isinstance(qid, str) and self.get(qid) is not None
