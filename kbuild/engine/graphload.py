"""Loading the recorded graph: all of it, from the lock, or each memo when first asked for."""
from __future__ import annotations

import gc

from .buildstate import BuildState
from .lockfile import read_lock
from .snapshot import CLEAN
from .state import Memo, State


class GraphLoading(BuildState):
    def load_graph(self) -> None:
        # Loading the graph allocates a million small objects; the cyclic collector would scan
        # them again and again (3 s instead of 0.5 s at 100k queries), and they all live for the
        # whole build, so collection is paused while loading and they are frozen out of it.
        gc.disable()
        try:
            self.memos = self.state.load_memos()
            if self.lock_changed:
                self._import_lock()
        finally:
            gc.enable()
        gc.freeze()

    def _import_lock(self) -> None:
        """Take the graph from the lock when it changed under us (a fresh clone, a git pull).

        An entry naming an output where no output may be (outside the outputs' folder, in .git,
        the lock itself) is refused: a lock is a file anyone can edit in a pull request, and its
        outputs are files a build may remove."""
        imported = read_lock(self.engine.lock_path)
        for qid, memo in list(imported.items()):
            why = next(filter(None, (self.engine.outputs.problem(p, resolve=False) for p in memo.outputs)), None)
            if why is not None:
                del imported[qid]
                self.refused[qid] = (f"{self.lock_key}: the entry {qid} was ignored: {why}; "
                                     "review the change that brought it")
                self.changed.add(qid)  # the lock is written again without it
        if not self.read_only:  # a check or a dry run reads the lock; only a build takes it in
            keep = {q for q, m in imported.items() if self.memos.get(q) == m}
            self.state.replace_memos(imported.values(), keep_values_of=keep)
            self.state.set_meta("lock_hash", self.hasher.hash(self.lock_key))
            self.state.delete_meta(CLEAN)
        self.memos = imported



class LazyMemos(dict[str, Memo]):
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

    def preload(self, ids: list[str]) -> None:
        """Load these memos in one go rather than one query each."""
        missing = [q for q in ids if not dict.__contains__(self, q)]
        if missing:
            self.update(self.state.load_memos(missing))

    def get(self, qid: str, default: Memo | None = None) -> Memo | None:  # type: ignore[override]
        try:
            return self[qid]
        except KeyError:
            return default

    def __contains__(self, qid: object) -> bool:
        return isinstance(qid, str) and self.get(qid) is not None
