"""The no-op fast path: what the last build left settled, and what changed since.

When a build leaves every query settled it records the files read and the outputs written with
their hashes (and stats); the next build stats those files, as `git status` does, and does not
read the graph at all when none changed.
"""
from __future__ import annotations

import json
from typing import Any

from .buildstate import BuildState
from .hashing import hash_bytes
from .state import FileRead, flat

CLEAN = "clean"  # meta key: what the last build settled, for the no-op fast path


def _targets_digest(root_ids: list[str]) -> str:
    return hash_bytes("\n".join(sorted(root_ids)).encode())


class Snapshot(BuildState):
    def clean_summary(self, root_ids: list[str]) -> dict[str, Any] | None:
        """What the last build recorded when it left every query settled, if it still describes
        this build: the same lock, targets and rules."""
        if self.lock_changed or self.lock_behind:
            return None
        blob = self.state.get_meta(CLEAN)
        if blob is None:
            return None
        summary = json.loads(blob)
        if summary["targets"] != _targets_digest(root_ids):
            return None
        rules = self.engine.rules
        for name, fingerprint in summary["fingerprints"].items():
            r = rules.get(name)
            if r is None or r.fingerprint_with(self.sources) != fingerprint:
                return None
        return summary

    def changed_since(self, summary: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The files read and the outputs written that changed since the summary: a stat per
        file, as `git status` does, and not the graph (nor the stat cache, when each file still
        has the stat the summary recorded with its hash)."""
        hasher, stats = self.hasher, summary.get("stats", {})
        self.restatted = False

        def changed(path: str, digest: str) -> bool:
            recorded = stats.get(path)
            if recorded is not None and hasher.unchanged_since(path, recorded):
                return False
            now = hasher.hash(path)
            if now == digest and recorded is not None:
                self.restatted = True  # same content, another stat (a checkout, a copy): recorded anew
            return now != digest

        return ([path for path, digest in summary["files"].items() if changed(path, digest)],
                [path for path, digest in summary["outputs"].items() if changed(path, digest)])

    def _stats_of(self, summary: dict[str, Any]) -> dict[str, list[int]]:
        """The stat of each file the summary names, where the stat cache holds it with that hash."""
        cache = self.hasher.stat_cache
        return {path: list(entry[0]) for kind in ("files", "outputs") for path, digest in summary[kind].items()
                if (entry := cache.get(path)) is not None and entry[1] == digest}

    def still_clean(self, root_ids: list[str]) -> int | None:
        """The number of queries, when the whole graph is still settled; else None."""
        summary = self.clean_summary(root_ids)
        if summary is None or any(self.changed_since(summary)):
            return None
        return summary["queries"]

    def _complete_stats(self, summary: dict[str, Any]) -> None:
        """A no-op that had to hash files the summary holds no stat for (outputs a build had just
        written are too new to trust their stats) records their stats now, so the next no-op,
        and `kbuild.uptodate`, need only a stat per file. So does one that found files whose stat
        changed while their content did not (rewritten as they were by a checkout, copied):
        else every no-op after it would hash them again, and kbuild.uptodate never hold."""
        restatted = getattr(self, "restatted", False)
        if restatted or len(summary.get("stats", {})) < len(summary["files"]) + len(summary["outputs"]):
            stats = self._stats_of(summary)
            if restatted or len(stats) > len(summary.get("stats", {})):
                summary["stats"] = stats
                self.state.set_meta(CLEAN, json.dumps(summary))

    def _record_clean(self, root_ids: list[str]) -> None:
        if self.failed or len(self.green) != len(self.memos):
            return
        files: dict[str, str] = {}
        outputs: dict[str, str] = {}
        fingerprints: dict[str, str] = {}
        for memo in self.memos.values():
            if fingerprints.setdefault(memo.rule, memo.fingerprint) != memo.fingerprint:
                return
            outputs.update(memo.outputs)
            for group in memo.deps:
                for dep, digest in group:
                    if isinstance(dep, FileRead):
                        files[dep.path] = digest
        summary = {"targets": _targets_digest(root_ids), "fingerprints": fingerprints, "files": files,
                   "outputs": outputs, "queries": len(self.memos)}
        summary["stats"] = self._stats_of(summary)
        self.state.set_meta(CLEAN, json.dumps(summary))

    def _update_clean(self, summary: dict[str, Any], changed_files: list[str]) -> None:
        """The summary of a build that loaded only what changes reached, brought up to date from
        the memos it replaced and removed, when it too left every query settled."""
        reached, dead = self.reached, self.dead
        assert reached is not None
        if self.failed or any(q not in self.green and q not in dead for q in reached):
            return
        files, outputs = summary["files"], summary["outputs"]
        touched = set(changed_files)
        for old in [*self.replaced.values(), *dead.values()]:
            for path in old.outputs:
                outputs.pop(path, None)
            touched |= {d.path for d, _ in flat(old.deps) if isinstance(d, FileRead)}
        for qid in self.report.executed:
            if qid in dead:
                continue
            memo = self.memos[qid]
            outputs.update(memo.outputs)
            touched |= {d.path for d, _ in flat(memo.deps) if isinstance(d, FileRead)}
            if memo.rule not in summary["fingerprints"]:
                summary["fingerprints"][memo.rule] = memo.fingerprint
        for path in touched:
            if self.state.readers([FileRead.of(path)]):
                files[path] = self.hasher.hash(path)
            else:
                files.pop(path, None)
        summary["queries"] += sum(q not in self.replaced for q in self.report.executed) - len(dead)
        summary["stats"] = self._stats_of(summary)
        self.state.set_meta(CLEAN, json.dumps(summary))
