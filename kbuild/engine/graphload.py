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


class GraphLoading(BuildState):
    def load_graph(self) -> None:
        with long_lived():
            self.memos = self.state.load_memos()
            if self.lock_changed:
                self._import_lock()

    def load_reached(self, changed_files: list[str], changed_outputs: list[str], root_ids: list[str]) -> None:
        """Load only the queries that the changed files and outputs reach through the recorded
        graph read backwards; every other query is settled with its recorded hash, which its
        readers recorded too (the last build left every read settled)."""
        with long_lived():
            self._load_reached(changed_files, changed_outputs, root_ids)

    def _load_reached(self, changed_files: list[str], changed_outputs: list[str], root_ids: list[str]) -> None:
        state = self.state
        frontier = state.readers(FileRead.of(p) for p in changed_files)
        for writers in state.writers(changed_outputs).values():
            frontier |= writers
        reached: set[str] = set()
        while frontier:
            reached |= frontier
            frontier = state.readers(frontier) - reached
        self.reached = reached
        self.memos = _LazyMemos(state)
        self.memos.update(state.load_memos(reached))
        green = self.green
        for qid in reached:
            for dep, recorded in flat(self.memos[qid].deps):
                # a part read recorded the hash of one part, not the value's: the query is
                # settled from its own memo when it is demanded
                if dep not in reached and not isinstance(dep, FileRead) and PartHash.part_of(recorded) is None:
                    green[dep] = recorded
        for qid in root_ids:
            memo = self.memos.get(qid) if qid not in reached else None
            if memo is not None:
                green[qid] = memo.hash

    def _import_lock(self) -> None:
        """Take the graph from the lock when it changed under us (a fresh clone, a git pull).

        An entry naming an output where no output may be (outside the outputs' folder, in .git,
        the lock itself) is refused: a lock is a file anyone can edit in a pull request, and its
        outputs are files a build may remove."""
        lock = self.engine.lock
        imported: dict[str, Memo] = {}
        for file, memos in lock.read():
            for qid, memo in memos.items():
                why = next(filter(None, (self.engine.outputs.problem(p, resolve=False) for p in memo.outputs)), None)
                if why is not None:
                    self.refused[qid] = (f"{lock.name(file)}: the entry {qid} was ignored: {why}; "
                                         "review the change that brought it")
                    self.changed.add(qid)  # the lock is written again without it
                    continue
                placed = lock.file_for(memo.key)
                if placed is not file and placed != file:  # the same object, mostly: Path's == is slow
                    self.lock_misplaced = True
                imported[qid] = memo
        if not self.read_only:  # a check or a dry run reads the lock; only a build takes it in
            keep = {q for q, m in imported.items() if self.memos.get(q) == m}
            self.state.replace_memos(imported.values(), keep_values_of=keep)
            self.remember_lock_digests(self.lock_digests())
            self.state.delete_meta(CLEAN)
        self.memos = imported



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
