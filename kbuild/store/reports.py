"""Build reports kept in .kbuild/reports/, so `kbuild explain` can say why a query last ran."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..engine import Report
from ..engine.files import atomic_write
from .localstate import LocalState

KEPT = 50  # the newest reports; older ones go at each save


def report_json(report: Report) -> dict[str, Any]:
    """The report as `kbuild build --json` prints it and as it is saved."""
    return {
        "executed": report.executed,
        "reused": report.reused,
        "cutoff": report.cutoff,
        "failed": report.failed,
        "waiting": report.waiting,
        "reasons": report.reasons,
        "removed": report.removed,
        "calls": report.calls,
        "cache_hits": report.cache_hits,
        "remote_hits": report.remote_hits,
        "counters": report.counters,
        "decisions": report.decisions,
        "warnings": report.warnings,
        "seconds": round(report.seconds, 3),
    }


def save_report(local: LocalState, report: Report) -> None:
    """Every build leaves its report, named by when it was saved, so they sort by time."""
    now = time.time_ns()  # one reading of the clock: two could straddle a second and sort out of order
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 10**9)) + f"-{now % 10**9:09d}"
    atomic_write(local.reports / f"{stamp}.json", json.dumps(report_json(report), indent=1, sort_keys=True).encode())
    for old in sorted(local.reports.glob("*.json"))[:-KEPT]:
        old.unlink()


@dataclass(frozen=True)
class Verdict:
    """What the cutoff hook said of a rebuilt value."""

    same: bool
    stage: str
    probability: float | None
    reason: str


@dataclass(frozen=True)
class LastRun:
    """The newest saved build that ran a query."""

    build: str  # when, as the report's name has it (YYYYmmddTHHMMSS)
    reason: str  # why it ran
    verdict: Verdict | None  # the cutoff hook's, when one judged the new value
    unchanged: bool  # its new value was byte for byte the old one


def last_run(local: LocalState, qid: str) -> LastRun | None:
    for path in sorted(local.reports.glob("*.json"), reverse=True):
        past = json.loads(path.read_text())
        if qid not in past["reasons"]:
            continue
        decision = past.get("decisions", {}).get(qid)
        verdict = None if not decision else Verdict(decision["same"], decision["stage"], decision["probability"],
                                                     decision["reason"])
        return LastRun(path.stem[:15], past["reasons"][qid], verdict, qid in past.get("cutoff", {}))
    return None
