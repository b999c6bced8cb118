"""The provider's batch service (OpenAI's Batch API; vLLM and others serve the same endpoints),
through the openai SDK: submit a build's deferred calls as one JSONL file, collect what finished.

What lies in `.kbuild/batches/` (LocalState.batches):

- `<id>.json`: a batch submitted and not collected yet (its id, input file, custom ids);
- `results/<id>.jsonl`: what a collected batch answered (and refused), one line per request,
  read by every build in batch mode until a build ends with nothing waiting;
- `collected`: the ids of batches already collected, one a line, so that listing the account's
  batches does not take an old one for a lost one.

A batch carries metadata naming kbuild and the store (`created_by`, `kbuild_store`). The id is
recorded after `batches.create` returns, so a crash in between leaves a batch nobody recorded:
the next collect lists the account's batches and adopts every one of this store's that is neither
recorded nor collected, reading its custom ids back from its input file. A crash before
`batches.create` leaves only an uploaded file; its calls are deferred again and submitted anew.
A request is identified by the hash of its whole request (the call cache's key), so an answer
collected twice, or once online and once from a batch, is one cache entry.
"""
from __future__ import annotations

import contextlib
import io
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel

from ..engine import atomic_write
from .batchcalls import BatchCalls
from .settings import ModelSettings

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"  # the only window OpenAI offers
RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
LISTED_DAYS = 7  # a lost batch is looked for among the account's batches of the last week
RETRIED_STATUSES = (408, 409, 429)  # a client error that asking again may cure


class BatchResult(BaseModel):
    """One request of a collected batch, as kept in results/: its answer, or the server's refusal."""

    custom_id: str
    answer: dict[str, Any] | None = None  # the chat.completion body
    refused: str | None = None


class BatchRecord(BaseModel):
    """A batch this store submitted and has not collected."""

    id: str
    input_file_id: str
    custom_ids: list[str]
    submitted_at: float


@dataclass(frozen=True)
class Progress:
    """Where the batches still running stand, as the service counts their requests."""

    batches: int
    total: int
    done: int
    statuses: tuple[str, ...]


@dataclass
class Collected:
    """What one collect found: the calls for the build, and what to tell the user."""

    calls: BatchCalls
    running: list[BatchRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # batches that failed outright, with the reason


class BatchService:
    def __init__(self, settings: ModelSettings, folder: Path, store: str) -> None:
        self.settings = settings
        self.folder = folder
        self.store = store[-512:]  # a metadata value holds at most 512 characters
        self.client = openai.OpenAI(api_key=settings.api_key or "not-needed", base_url=settings.base_url,
                                    timeout=settings.timeout, max_retries=settings.max_retries)

    @staticmethod
    def store_name(root: Path) -> str:
        """What names a store in its batches' metadata: this machine and the store's folder."""
        return f"{socket.gethostname()}:{root.resolve()}"

    @property
    def where(self) -> str:
        return self.settings.base_url or "api.openai.com"

    # -- the folder ----------------------------------------------------------------------------

    def _records(self) -> list[BatchRecord]:
        found = []
        for path in sorted(self.folder.glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                found.append(BatchRecord.model_validate_json(path.read_bytes()))
        return found

    def _record(self, record: BatchRecord) -> None:
        atomic_write(self.folder / f"{record.id}.json", record.model_dump_json().encode())

    def _collected_ids(self) -> set[str]:
        try:
            return set((self.folder / "collected").read_text().split())
        except FileNotFoundError:
            return set()

    def _mark_collected(self, batch_id: str) -> None:
        ids = self._collected_ids() | {batch_id}
        atomic_write(self.folder / "collected", "".join(f"{i}\n" for i in sorted(ids)).encode())
        with contextlib.suppress(FileNotFoundError):
            (self.folder / f"{batch_id}.json").unlink()

    def _results(self) -> Iterator[BatchResult]:
        for path in sorted((self.folder / "results").glob("*.jsonl")):
            with contextlib.suppress(OSError):
                for line in path.read_text().splitlines():
                    with contextlib.suppress(ValueError):  # a damaged line is a request asked again
                        yield BatchResult.model_validate_json(line)

    def forget_results(self) -> None:
        """After a build with nothing waiting every answer it needed is in the call cache."""
        for path in (self.folder / "results").glob("*.jsonl"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # -- collect -------------------------------------------------------------------------------

    def collect(self) -> Collected:
        """Every batch of this store asked about once: finished ones are collected, the rest are
        left running; the calls a build answers from, and what it must not submit again."""
        records = self._records()
        records += self._lost({r.id for r in records})
        collected = Collected(BatchCalls())
        for record in records:
            batch = self.client.batches.retrieve(record.id)
            if batch.status in RUNNING:
                collected.running.append(record)
                continue
            answered, refused, retried = self._download(batch)
            self._mark_collected(record.id)
            note = f"collected batch {record.id} ({batch.status}): {answered} answered"
            if refused:
                note += f", {refused} refused"
            if retried:
                note += f", {retried} to ask again in a new batch"
            collected.notes.append(note)
            if batch.status == "failed":
                reasons = "; ".join(e.message or e.code or "" for e in (batch.errors.data or [])) if batch.errors else ""
                collected.problems.append(f"batch {record.id} failed ({reasons or 'no reason given'}); its "
                                          f"{len(record.custom_ids)} calls go into a new batch")
        calls = collected.calls
        for result in self._results():
            if result.answer is not None:
                calls.answers[result.custom_id] = result.answer
            elif result.refused is not None:
                calls.refusals[result.custom_id] = result.refused
        calls.running = {c for r in collected.running for c in r.custom_ids} - calls.answers.keys()
        return collected

    def _lost(self, known: set[str]) -> list[BatchRecord]:
        """This store's batches that were submitted but never recorded (a crash in between)."""
        skip = known | self._collected_ids()
        oldest = time.time() - LISTED_DAYS * 86400
        found = []
        for batch in self.client.batches.list(limit=100):
            if batch.created_at < oldest:
                break  # newest first: the rest are older still
            metadata = batch.metadata or {}
            if metadata.get("created_by") != "kbuild" or metadata.get("kbuild_store") != self.store or batch.id in skip:
                continue
            lines = self.client.files.content(batch.input_file_id).text.splitlines()
            record = BatchRecord(id=batch.id, input_file_id=batch.input_file_id, submitted_at=batch.created_at,
                                 custom_ids=[json.loads(line)["custom_id"] for line in lines if line.strip()])
            self._record(record)
            found.append(record)
        return found

    def _download(self, batch: Any) -> tuple[int, int, int]:
        """Keep what a finished batch answered and refused; (answered, refused, to ask again)."""
        rows = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                rows += [json.loads(line) for line in self.client.files.content(file_id).text.splitlines() if line.strip()]
        kept: list[BatchResult] = []
        refused = retried = 0
        for row in rows:
            response = row.get("response") or {}
            status, body = response.get("status_code"), response.get("body") or {}
            if status == 200:
                kept.append(BatchResult(custom_id=row["custom_id"], answer=body))
            elif isinstance(status, int) and 400 <= status < 500 and status not in RETRIED_STATUSES:
                error = body.get("error") if isinstance(body.get("error"), dict) else {}
                kept.append(BatchResult(custom_id=row["custom_id"],
                                        refused=str(error.get("message") or f"status {status}")))
                refused += 1
            else:  # a server error, an expired or cancelled request: asked again, in the next batch
                retried += 1
        atomic_write(self.folder / "results" / f"{batch.id}.jsonl",
                     "".join(result.model_dump_json() + "\n" for result in kept).encode())
        return len(kept) - refused, refused, retried

    # -- submit --------------------------------------------------------------------------------

    def submit(self, bodies: dict[str, dict[str, Any]]) -> BatchRecord:
        """One JSONL file of requests, uploaded and submitted as one batch, and its id recorded."""
        lines = "".join(json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body},
                                   sort_keys=True) + "\n" for custom_id, body in sorted(bodies.items()))
        upload = self.client.files.create(file=("kbuild-batch.jsonl", io.BytesIO(lines.encode()), "application/jsonl"),
                                          purpose="batch")
        batch = self.client.batches.create(input_file_id=upload.id, endpoint=ENDPOINT,
                                           completion_window=COMPLETION_WINDOW,
                                           metadata={"created_by": "kbuild", "kbuild_store": self.store})
        record = BatchRecord(id=batch.id, input_file_id=upload.id, custom_ids=sorted(bodies), submitted_at=time.time())
        self._record(record)
        return record

    # -- wait ----------------------------------------------------------------------------------

    def progress(self, records: list[BatchRecord]) -> Progress:
        total = done = 0
        statuses = []
        for record in records:
            batch = self.client.batches.retrieve(record.id)
            statuses.append(batch.status)
            counts = batch.request_counts
            total += counts.total if counts and counts.total else len(record.custom_ids)
            done += (counts.completed + counts.failed) if counts else 0
        return Progress(len(records), total, done, tuple(statuses))

    def wait(self, records: list[BatchRecord], every: float, show: Callable[[Progress], None]) -> None:
        """Poll every `every` seconds until none of `records` is running, showing each poll."""
        while True:
            now = self.progress(records)
            show(now)
            if not any(s in RUNNING for s in now.statuses):
                return
            time.sleep(every)
