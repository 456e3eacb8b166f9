"""``groupcomm edit``: a terminal editor in which several people edit one text at once
(docs/commands.md; docs/replicated.md, "The editor")."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groupcomm.apps.session_options import add_session_arguments, session_options
from groupcomm.apps.shared_text import DEFAULT_WINDOW, SharedText
from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    run_main,
    setup_logging,
    warn_if_known_bad,
)
from groupcomm.core.registry import get_module
from groupcomm.filters.latest_value import DEFAULT_HOLD, LatestValueCreator
from groupcomm.replicated import supported_modules, unsupported_reason
from groupcomm.replicated.editor import presence_slot
from groupcomm.transport.communicator import Communicator, CommunicatorError
from groupcomm.transport.config import Delivery, Listeners, StateTransfer

log = logging.getLogger(__name__)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm edit",
        description="Edit one text together with the other members of a session. Keys: "
        "type, Enter, Backspace, Delete, arrows, Home/End, PageUp/PageDown; Ctrl-S saves "
        "to --file; Ctrl-Q leaves (without --file, it asks first and offers to save).",
    )
    add_session_arguments(parser, "edit")
    parser.add_argument("--file", metavar="PATH",
                        help="seed an empty session with this file's text; Ctrl-S and "
                        "leaving save the text here")
    parser.add_argument("--allow-divergence", action="store_true",
                        help="run with a module that does not carry the replicated text "
                        "(none, fifo, mfss, cykas), with a warning on the screen")
    parser.add_argument("--batch", action="store_true",
                        help="no screen: read commands from stdin (type, goto, end, backspace, "
                        "delete, wait-text, quiet, typing, show, quit; see docs/commands.md)")
    parser.add_argument("--presence-hold", type=float, default=DEFAULT_HOLD * 1000,
                        metavar="MS", help="jitter buffer for the others' cursor moves "
                        f"(default {DEFAULT_HOLD * 1000:g} ms; edits are never held)")
    parser.add_argument("--coalesce", type=float, default=DEFAULT_WINDOW * 1000, metavar="MS",
                        help="send consecutive keystrokes as one edit, at most MS after the "
                        f"first (default {DEFAULT_WINDOW * 1000:g}; 0: every key at once; "
                        "cursor moves are never held)")
    parser.add_argument("--no-clock-acks", dest="clock_acks", action="store_false",
                        help="never acknowledge the clock on the heartbeat (a member that "
                        "only reads then keeps the others from collecting; the demo uses "
                        "it so that acknowledgements, which count as sends in the clocks, "
                        "do not change the order of its concurrent inserts)")
    return parser


class StatusLog(logging.Handler):
    """The framework's latest warning, for the status line."""

    def __init__(self, on_change) -> None:
        super().__init__(logging.WARNING)
        self.latest = ""
        self.on_change = on_change

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.latest = record.getMessage().splitlines()[0][:200]
            self.on_change()
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    prog = "groupcomm edit"
    if args.presence_hold < 0:
        raise CliError(f"{prog}: --presence-hold must be >= 0")
    if not 0 <= args.coalesce <= 10_000:
        raise CliError(f"{prog}: --coalesce must be between 0 and 10000 ms, not "
                       f"{args.coalesce:g}")
    options = session_options(
        args, prog, extra_receive=[LatestValueCreator(presence_slot, args.presence_hold / 1000)],
        warn_known_bad=False)
    module = options.selection.causality or "none"
    reason = unsupported_reason(module)
    if reason and not args.allow_divergence:
        raise CliError(f"{prog}: refusing {reason} (copies of the text must converge; "
                       f"use one of {', '.join(supported_modules())}; or "
                       "--allow-divergence to watch them diverge)")
    warn_if_known_bad(get_module(module), prog)
    seed = None
    if args.file and Path(args.file).exists():
        try:
            seed = Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CliError(f"{prog}: cannot read --file {args.file}: {error}") from None
    if not args.batch and (not sys.stdin.isatty() or not sys.stdout.isatty()):
        raise CliError(f"{prog}: needs a terminal (run it in one, or in tmux; --batch "
                       "reads commands from stdin instead)")
    shared = SharedText(args.name, collect=reason is None, window=args.coalesce / 1000)
    if args.batch:
        screen: Any = None
        status = StatusLog(lambda: None)
    else:
        from groupcomm.apps.edit_screen import EditScreen  # prompt_toolkit, when used

        screen = EditScreen(shared, args.session, module, warning=reason, file=args.file)
        shared.on_change = screen.refresh
        status = StatusLog(screen.refresh)
        screen.status_log = status
        if args.verbose == 0:  # the terminal belongs to the editor
            logging.getLogger().handlers[:] = [status]
    try:
        communicator = Communicator(
            args.name, args.session, **options.communicator_kwargs,
            state=StateTransfer(provider=shared.snapshot, consumer=shared.install),
            listeners=Listeners(session=shared, message=shared.on_message,
                                event=shared.on_event),
            # a member that only reads acknowledges what it took in (collection)
            delivery=Delivery(acknowledged=True, clock_acks=args.clock_acks))
    except (CommunicatorError, OSError, ValueError) as error:
        raise CliError(f"{prog}: {error}") from None
    try:
        options.inject_delays(communicator)
        if len(communicator.members_at_join) > 1:
            print(f"joined {args.session}; getting the text from "
                  f"{communicator.members_at_join[0]}...", flush=True)
        communicator.wait_for_state()  # an edit before it would be lost
        shared.attach(communicator)
        if seed is not None:
            if communicator.members_at_join == [communicator.member_id]:
                shared.insert(seed)
                shared.move_to(0)
            else:
                status.latest = (f"{args.file} not loaded: the session already has a text "
                                 "(it is saved there on Ctrl-S)")
                log.warning("%s", status.latest)
        if screen is not None:
            screen.run()
        else:
            from groupcomm.apps.edit_batch import BatchEditor

            if reason:
                print(f"! copies may diverge: {reason}", flush=True)
            print(f"{args.name} joined {args.session} with causality {module} (members: "
                  f"{', '.join(communicator.members_at_join)})", flush=True)
            BatchEditor(shared, sys.stdout).run(sys.stdin)
    finally:
        try:
            shared.close()  # what was typed last is sent before leaving
        except Exception as error:  # noqa: BLE001 - leaving goes on; the text is saved
            log.warning("the last typing was not sent: %s", error)
        communicator.close()
        if args.file:
            written = shared.save(args.file)
            print(f"saved {written} characters to {args.file}")
        elif screen is not None and screen.saved_to:
            print(f"saved {screen.saved_chars} characters to {screen.saved_to}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    # run as the importable module (groupcomm.apps.edit), as the entry point does
    from groupcomm.apps.edit import main as importable_main

    sys.exit(importable_main())
