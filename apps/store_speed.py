"""``groupcomm store speed``: how fast the session store keeps the keystrokes of a recorded
editing session, with SQLite, with PostgreSQL and with pycrdt-store (Yjs updates in its
SQLite store), in the same run; then how long each takes to restore the document
(BENCHMARKS.md, "Store speed").

Each keystroke becomes what the session server keeps: the shared editor's operation as
its message (id, sender, msgpack payload, tag), appended and committed (``--batch``
messages per transaction; 1 is a server relaying keystrokes one at a time). pycrdt-store
gets the Yjs update of each edit through ``SQLiteYStore.write`` (a transaction each, its
default checkpoint every 100 updates). Restoring reads everything back into a new text
and checks it against the trace's; for SQLite and PostgreSQL also from a snapshot of
the text kept in place of the messages, as the server keeps a session once a member
answered its snapshot request.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from groupcomm.apps.text_trace import Trace, read_trace, say
from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_output_arguments,
    run_main,
    setup_logging,
)
from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence
from groupcomm.store.backend import (
    StoreBackend,
    StoredMessage,
    StoredSnapshot,
    StoreError,
    open_store,
)
from groupcomm.wire.payload import PAYLOAD_MSGPACK, dump_payload, load_plain

__all__ = ["BACKENDS", "main", "keystroke_messages"]

PROG = "groupcomm store speed"
#: the application and session the keystrokes are stored under
APPLICATION, SESSION = "edit", "paper"
AUTHOR = "u~1"
BACKENDS = ("sqlite", "postgresql", "pycrdt-store")
#: seconds between two progress lines
PROGRESS_EVERY = 5.0


@dataclass
class Keystrokes:
    """What is stored: the editor's messages and pycrdt's updates for the same edits,
    and the text they make."""

    edits: int
    messages: list[StoredMessage]
    updates: list[bytes]
    text: str


def keystroke_messages(trace: Trace, limit: int | None) -> Keystrokes:
    """The first ``limit`` edits of ``trace`` (all when None) as the editor's messages
    (an edit that deletes and inserts is two) and as pycrdt updates."""
    import pycrdt

    text = TextSequence()
    doc = pycrdt.Doc()
    ytext = doc.get("text", type=pycrdt.Text)
    messages: list[StoredMessage] = []
    updates: list[bytes] = []
    doc.observe(lambda event: updates.append(event.update))

    def send(op: Any) -> None:
        seq = len(messages) + 1
        fmt, payload = dump_payload(op)
        message_id = f"{AUTHOR}#{seq}"
        text.effect(op, Tag({AUTHOR: seq}), message_id, AUTHOR)
        messages.append(StoredMessage(message_id, AUTHOR, fmt, payload, vc=((AUTHOR, seq),)))

    if trace.start:
        send(text.prepare_insert(0, trace.start))
        ytext.insert(0, trace.start)
    edits = 0
    for position, deleted, inserted in trace.edits():
        if limit is not None and edits >= limit:
            break
        edits += 1
        if deleted:
            send(text.prepare_delete(position, deleted))
        if inserted:
            send(text.prepare_insert(position, inserted))
        with doc.transaction():
            if deleted:
                del ytext[position:position + deleted]
            if inserted:
                ytext.insert(position, inserted)
    if text.value != str(ytext):
        raise CliError(f"{PROG}: the text and pycrdt disagree after {edits} edits")
    return Keystrokes(edits, messages, updates, text.value)


class Progress:
    """A line on stderr every :data:`PROGRESS_EVERY` seconds while a long loop runs."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total = label, total
        self.started = self.shown = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.shown >= PROGRESS_EVERY:
            self.shown = now
            rate = done / (now - self.started)
            left = (self.total - done) / rate if rate else 0.0
            say(f"  {self.label}: {done}/{self.total} ({rate:.0f}/s, about {left:.0f} s left)")


def _store_messages(store: StoreBackend, messages: Sequence[StoredMessage], batch: int,
                    label: str) -> float:
    """Append and commit every message (``batch`` per transaction); the seconds taken."""
    store.create_session(APPLICATION, SESSION, "bench", time.time())
    store.commit()
    progress = Progress(label, len(messages))
    started = time.perf_counter()
    for start in range(0, len(messages), batch):
        store.append(APPLICATION, SESSION, messages[start:start + batch])
        store.commit()
        progress(start + batch)
    return time.perf_counter() - started


def _restore_text(location: str) -> tuple[TextSequence, float, float]:
    """The text rebuilt from the store at ``location`` as a newcomer gets it (the
    snapshot, then the messages after it): the seconds to read the session and the
    seconds to rebuild the text."""
    started = time.perf_counter()
    store = open_store(location, create=False)
    try:
        stored = store.load(APPLICATION, SESSION)
    finally:
        store.close()
    read = time.perf_counter() - started
    if stored is None:
        raise CliError(f"{PROG}: the store lost the session")
    text = (TextSequence.from_state(msgpack.unpackb(stored.snapshot.data))
            if stored.snapshot is not None else TextSequence())
    for message in stored.messages:
        if message.fmt != PAYLOAD_MSGPACK:  # never unpickle what a store hands back
            raise CliError(f"{PROG}: message {message.message_id} is not msgpack")
        text.effect(load_plain(message.payload), Tag(dict(message.vc)), message.message_id,
                    message.sender)
    return text, read, time.perf_counter() - started - read


def bench_groupcomm(name: str, location: str, keys: Keystrokes, batch: int
                    ) -> dict[str, Any]:
    """Store the keystrokes' messages at ``location`` and restore them; then keep the
    text's snapshot (collected: every operation stable) in their place, as the server
    does when a member answers its snapshot request, and restore from it."""
    store = open_store(location)
    try:
        seconds = _store_messages(store, keys.messages, batch, name)
    finally:
        store.close()
    say(f"  {name}: restoring from the messages")
    text, read, replay = _restore_text(location)
    # the member's snapshot as the editor takes it: everything delivered is stable (one
    # author), so collection leaves the text without its deleted characters' history
    stability = Stability(AUTHOR, [AUTHOR])
    stability.delivered(AUTHOR, Tag({AUTHOR: len(keys.messages)}))
    text.collect(stability)
    store = open_store(location, create=False)
    try:
        state = msgpack.packb(text.state())
        store.put_snapshot(APPLICATION, SESSION, StoredSnapshot(
            PAYLOAD_MSGPACK, state, tuple(m.message_id for m in keys.messages),
            ((AUTHOR, len(keys.messages)),), time.time(), AUTHOR),
            [m.message_id for m in keys.messages])
        store.commit()
    finally:
        store.close()
    say(f"  {name}: restoring from a snapshot")
    from_snapshot, snapshot_read, snapshot_rebuild = _restore_text(location)
    return {"backend": name, "messages": len(keys.messages), "batch": batch,
            "store_seconds": round(seconds, 2),
            "messages_per_second": round(len(keys.messages) / seconds),
            "restore_seconds": round(read + replay, 2), "restore_read_seconds": round(read, 2),
            "restored_exactly": text.value == keys.text,
            "snapshot_bytes": len(state),
            "restore_from_snapshot_seconds": round(snapshot_read + snapshot_rebuild, 3),
            "restored_from_snapshot_exactly": from_snapshot.value == keys.text}


def bench_pycrdt_store(path: str, keys: Keystrokes) -> dict[str, Any]:
    """Write every Yjs update into pycrdt-store's SQLiteYStore, then restore the doc."""
    import anyio
    import pycrdt
    from pycrdt.store import SQLiteYStore

    def ystore() -> SQLiteYStore:
        store = SQLiteYStore(SESSION)
        store.db_path = path
        return store

    async def write() -> float:
        progress = Progress("pycrdt-store", len(keys.updates))
        async with ystore() as store:
            started = time.perf_counter()
            for done, update in enumerate(keys.updates, 1):
                await store.write(update)
                progress(done)
            return time.perf_counter() - started

    async def restore() -> tuple[str, float]:
        started = time.perf_counter()
        doc = pycrdt.Doc()
        async with ystore() as store:
            await store.apply_updates(doc)
        return str(doc.get("text", type=pycrdt.Text)), time.perf_counter() - started

    seconds = anyio.run(write)
    say("  pycrdt-store: restoring")
    value, restore_seconds = anyio.run(restore)
    return {"backend": "pycrdt-store", "messages": len(keys.updates), "batch": 1,
            "store_seconds": round(seconds, 2),
            "messages_per_second": round(len(keys.updates) / seconds),
            "restore_seconds": round(restore_seconds, 2), "restore_read_seconds": None,
            "restored_exactly": value == keys.text}


def _postgres_location(url: str | None, stack: ExitStack) -> str:
    """A fresh database: in ``url``'s server (a new one named after this run), or in a
    PostgreSQL server started for the run (durable settings: fsync on)."""
    if url:
        import psycopg

        name = f"groupcomm_bench_{os.getpid()}_{int(time.time())}"
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
        except psycopg.Error as error:
            raise CliError(f"{PROG}: --postgres: {str(error).strip().splitlines()[0]}") \
                from None
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    from groupcomm.tools.pgserver import PostgresError, TempPostgres

    say("starting a PostgreSQL server for the run (initdb, pg_ctl)")
    try:
        server = stack.enter_context(TempPostgres())
        return server.create_database("bench")
    except PostgresError as error:
        raise CliError(f"{PROG}: {error}") from None


def run(trace_path: str, *, limit: int | None, batch: int, backends: Sequence[str],
        postgres: str | None, workdir: str | None = None,
        report: Callable[[dict[str, Any]], None] = lambda row: None) -> dict[str, Any]:
    """The whole benchmark; returns the conditions and one row per backend."""
    trace = read_trace(trace_path)
    say(f"{trace.name}: {len(trace)} edits; preparing the messages and Yjs updates")
    keys = keystroke_messages(trace, limit)
    rows = []
    with ExitStack() as stack:
        scratch = Path(tempfile.mkdtemp(prefix="groupcomm-store-speed-", dir=workdir))
        stack.callback(shutil.rmtree, scratch, True)
        for backend in backends:
            try:
                if backend == "sqlite":
                    location = str(scratch / "sessions.db")
                elif backend == "postgresql":
                    location = _postgres_location(postgres, stack)
                say(f"{backend}: storing {len(keys.messages)} messages")
                if backend == "pycrdt-store":
                    row = bench_pycrdt_store(str(scratch / "ystore.db"), keys)
                else:
                    row = bench_groupcomm(backend, location, keys, batch)
            except StoreError as error:
                raise CliError(f"{PROG}: {backend}: {error}") from None
            report(row)
            rows.append(row)
    return {"trace": trace.name, "edits": keys.edits, "characters": len(keys.text),
            "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
            "results": rows}


def _exact(row: dict[str, Any]) -> bool:
    return row["restored_exactly"] and row.get("restored_from_snapshot_exactly", True)


def _print_row(row: dict[str, Any]) -> None:
    snapshot = (f", from a {row['snapshot_bytes']:,}-byte snapshot in "
                f"{row['restore_from_snapshot_seconds']:.3f} s"
                if "snapshot_bytes" in row else "")
    print(f"{row['backend']:>13}: {row['messages']:>7} messages in "
          f"{row['store_seconds']:>7.2f} s = {row['messages_per_second']:>6}/s "
          f"(batch {row['batch']}); restored in {row['restore_seconds']:.2f} s{snapshot}"
          f"{'' if _exact(row) else ' (NOT the same text)'}", flush=True)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Messages stored per second and time to restore, for the keystrokes "
                    "of a recorded editing session, with SQLite, with PostgreSQL and with "
                    "pycrdt-store (same run, same keystrokes).")
    parser.add_argument("--trace", required=True,
                        help="an editing trace in the sequential_traces format, e.g. "
                             "automerge-paper.json.gz of the editing-traces repository")
    parser.add_argument("--keystrokes", type=int, default=None,
                        help="only the first N edits (default all)")
    parser.add_argument("--batch", type=int, default=1,
                        help="messages per transaction (default 1: a commit per keystroke, "
                             "as a server relaying keystrokes one at a time)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help=f"which, comma-separated (default {','.join(BACKENDS)})")
    parser.add_argument("--postgres", metavar="URL",
                        help="a PostgreSQL server to use (a new database is made in it); "
                             "default: start one for the run with initdb/pg_ctl")
    add_output_arguments(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown or not backends:
        raise CliError(f"{PROG}: --backends: choose among {', '.join(BACKENDS)}")
    if args.keystrokes is not None and args.keystrokes < 1:
        raise CliError(f"{PROG}: --keystrokes must be at least 1")
    if args.batch < 1:
        raise CliError(f"{PROG}: --batch must be at least 1")
    result = run(args.trace, limit=args.keystrokes, batch=args.batch, backends=backends,
                 postgres=args.postgres,
                 report=(lambda row: None) if args.json else _print_row)
    if args.json:
        import json

        print(json.dumps(result))
    return 0 if all(_exact(row) for row in result["results"]) else 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
