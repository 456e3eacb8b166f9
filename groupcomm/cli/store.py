"""``groupcomm store ls | export SESSION | drop SESSION --store PATH``: what the session
server's store keeps; ``groupcomm store crash | bench | speed``: the store measured
(their modules are named in :data:`MEASUREMENTS`) (docs/storage.md). ``export`` gives the IM history or the shared
text of the built-in apps as text (``--json``: the snapshot and messages as JSON); it
reads the payloads the server stored (pickles among them), so run it on a store you
trust, as you trust the server that wrote it."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from groupcomm.cli.args import ArgumentParser, CliError, run_main, setup_logging
from groupcomm.core.messages import Tag
from groupcomm.core.session_messages import SESSION_TRAFFIC
from groupcomm.replicated.editor import EditorReplica
from groupcomm.store.backend import StoreBackend, StoredSession, StoreError, open_store
from groupcomm.wire.payload import load_payload

#: ``groupcomm store WORD``: the measurements, each a module with ``main(argv) -> int``
MEASUREMENTS: dict[str, str] = {
    "crash": "groupcomm.tools.store_crash",
    "bench": "groupcomm.tools.store_bench",
    "speed": "groupcomm.apps.store_speed",
}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm store",
        description="See, export and remove what a session server's store keeps "
                    "(groupcomm serve --store PATH).")
    parser.add_argument("action", choices=("ls", "export", "drop"),
                        help="ls: the kept sessions; export: one session as text (the IM "
                        "history, the shared text) or JSON; drop: forget one session "
                        "(and groupcomm store crash|bench|speed --help: the store "
                        "under kill -9, the cost of its commit, its speed on an editing "
                        "trace)")
    parser.add_argument("session", nargs="?", help="SESSION, or APPLICATION/SESSION when "
                        "several applications have a session of that name")
    parser.add_argument("--store", required=True, metavar="PATH|URL",
                        help="the store file or postgresql:// URL (as given to groupcomm "
                        "serve --store)")
    parser.add_argument("--json", action="store_true", help="JSON instead of text")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _find(store: StoreBackend, name: str) -> tuple[str, str]:
    application, _, session = name.rpartition("/")
    found = [(i.application, i.session) for i in store.sessions()
             if i.session == session and application in ("", i.application)]
    if not found:
        raise CliError(f"groupcomm store: no session {name!r} in {store.location}")
    if len(found) > 1:
        raise CliError(f"groupcomm store: {name!r} names sessions of several applications "
                       f"({', '.join(a for a, _ in found)}); give APPLICATION/{session}")
    return found[0]


def _age(at: float | None) -> str:
    if at is None:
        return "-"
    seconds = max(0.0, time.time() - at)
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m" if (
        seconds < 7200) else f"{seconds / 3600:.1f}h"


def _ls(store: StoreBackend, as_json: bool) -> None:
    infos = store.sessions()
    if as_json:
        print(json.dumps([vars(i) for i in infos], indent=1))
        return
    if not infos:
        print(f"no sessions in {store.location}")
        return
    print(f"{'APPLICATION/SESSION':30} {'GENERATION':16} {'SNAPSHOT':>10} {'AGE':>6} "
          f"{'MESSAGES':>8} STATE")
    for i in infos:
        size = "-" if i.snapshot_size is None else f"{i.snapshot_size:,}"
        # behind: a store failure left a gap, until a member holding the state gives a
        # snapshot (docs/storage.md)
        print(f"{i.application + '/' + i.session:30} {i.generation:16} {size:>10} "
              f"{_age(i.snapshot_at):>6} {i.messages:>8} {'behind' if i.behind else 'whole'}")


def _decoded(stored: StoredSession) -> tuple[Any, list[tuple[str, str, Any, tuple]]]:
    """The snapshot's state and the replayed messages ``(id, sender, payload, tag)``."""
    snapshot = stored.snapshot
    state = load_payload(snapshot.fmt, snapshot.data) if snapshot is not None else None
    covered = set(snapshot.reflected) if snapshot is not None else set()
    messages = []
    for m in stored.messages:
        if m.message_id in covered:
            continue
        payload = load_payload(m.fmt, m.payload)
        if type(payload) not in SESSION_TRAFFIC:
            messages.append((m.message_id, m.sender, payload, m.vc))
    return state, messages


def _im_text(state: Any, messages: list[tuple[str, str, Any, tuple]]) -> str:
    # the chat's own rule for its conversation, looked up by name as the command table
    # does: the applications sit above the command line's modules
    conversation_text = importlib.import_module("groupcomm.apps.im_lines").conversation_text
    try:
        return conversation_text(state, [(sender, payload) for _, sender, payload, _ in messages])
    except (TypeError, ValueError) as error:
        raise CliError(f"groupcomm store: the stored conversation is not the chat's "
                       f"({error})") from None


def _edit_text(state: Any, messages: list[tuple[str, str, Any, tuple]]) -> str:
    replica = EditorReplica("(store export)", collect=False)
    if state is not None and not replica.install(state):
        raise CliError("groupcomm store: the stored text is not the editor's")
    for message_id, sender, payload, tag in messages:
        replica.delivered(sender, payload, Tag(tag), message_id)
    if replica.failures:
        raise CliError(f"groupcomm store: {replica.failures} stored edit(s) do not apply: "
                       f"{replica.last_failure}")
    return str(replica.text.value)


TEXT_FORMS = {"im": _im_text, "edit": _edit_text}


def _plain(value: Any) -> Any:
    """``value`` as JSON has it (what JSON cannot carry as its repr)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _export(store: StoreBackend, name: str, as_json: bool) -> None:
    application, session = _find(store, name)
    stored = store.load(application, session)
    assert stored is not None
    try:
        state, messages = _decoded(stored)
    except Exception as error:  # the payload decoders raise many types
        raise CliError(f"groupcomm store: {application}/{session} does not decode: "
                       f"{error}") from None
    if as_json:
        snapshot = stored.snapshot
        print(json.dumps({
            **vars(stored.info),
            "snapshot": None if snapshot is None else {
                "source": snapshot.source, "taken_at": snapshot.taken_at,
                "size": len(snapshot.data), "reflected": len(snapshot.reflected),
                "clock": dict(snapshot.clock), "state": _plain(state)},
            "messages": [{"id": i, "sender": s, "tag": dict(t), "payload": _plain(p)}
                         for i, s, p, t in messages]}, indent=1))
        return
    form = TEXT_FORMS.get(application)
    if form is None:
        raise CliError(f"groupcomm store: application {application!r} has no text form "
                       f"(the built-in ones: {', '.join(TEXT_FORMS)}); use --json")
    sys.stdout.write(form(state, messages) + "\n")


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.action != "ls" and not args.session:
        raise CliError(f"groupcomm store {args.action}: name the session")
    try:
        store = open_store(args.store, create=False)
    except StoreError as error:
        raise CliError(f"groupcomm store: {error}") from None
    try:
        if args.action == "ls":
            _ls(store, args.json)
        elif args.action == "export":
            _export(store, args.session, args.json)
        else:
            application, session = _find(store, args.session)
            store.drop(application, session)
            store.commit()
            print(f"dropped {application}/{session} (a running server keeps it until it "
                  "restarts; members coming back get a new generation)")
    except StoreError as error:
        raise CliError(f"groupcomm store: {error}") from None
    finally:
        store.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] and args[0] in MEASUREMENTS:
        module = importlib.import_module(MEASUREMENTS[args[0]])
        return int(module.main(args[1:]) or 0)
    return run_main(build_parser, _run, args)


if __name__ == "__main__":
    sys.exit(main())
