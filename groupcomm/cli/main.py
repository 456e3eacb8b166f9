"""The ``groupcomm`` command: the first word names the module of a subcommand."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from groupcomm.cli import args as cli_args

#: subcommand -> (module exposing ``main(argv) -> int``, one-line summary)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("groupcomm.cli.serve", "run a session server"),
    "store": ("groupcomm.cli.store", "see, export and drop the sessions a server's store keeps; store crash|bench|speed measure it"),
    "keys": ("groupcomm.cli.keys", "create CurveZMQ key pairs for per-client authentication"),
    "demo": ("groupcomm.apps.demo", "run the end-to-end demonstration (server, alice, bob, carol, Spark)"),
    "im": ("groupcomm.apps.im", "terminal instant messenger (one participant)"),
    "edit": ("groupcomm.apps.edit", "terminal editor: edit one text together (one participant)"),
    "web": ("groupcomm.web.cli", "web gateway: the IM and the shared editor in browsers"),
    "watch": ("groupcomm.web.watch", "live session view (clocks, held messages, diagram) "
              "of a trace directory, in a browser"),
    "filters": ("groupcomm.cli.filters", "list installed causality modules and filters"),
    "analyze": ("trace_analysis.cli", "check and measure traces with PySpark"),
    "overhead": ("groupcomm.tools.overhead", "metadata, control traffic and throughput per module"),
    "analyze-bench": ("trace_analysis.bench", "time the Spark analysis against plain Python"),
    "bench": ("groupcomm.tools.bench", "measure the communicator against raw pyzmq"),
    "member-bench": ("groupcomm.tools.members.bench", "how many terminal editors one session "
                     "server holds (sessions × members × rate), against pycrdt-websocket"),
    "text-bench": ("groupcomm.apps.text_bench", "edits per second and metadata of the shared text"),
    "text-wire": ("groupcomm.apps.text_wire", "bytes on the wire per keystroke of the shared editor, against Yjs"),
    "stress": ("groupcomm.apps.stress", "many real processes, random traffic and injected faults"),
    "simulate": ("groupcomm.cli.simulate", "discrete-event simulation of the protocols"),
    "check": ("groupcomm.cli.check", "bounded model checking of the protocol filters and "
              "of whole clients with the session registry"),
    "conformance": ("groupcomm.conformance.cli", "the conformance suite of a causality module (built-in or plugin)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        width = max(map(len, SUBCOMMANDS))
        print("usage: groupcomm COMMAND [options]   (groupcomm COMMAND --help for details)\n\n"
              "Causal message delivery for collaborative applications.\n\ncommands:")
        for name, (_, summary) in SUBCOMMANDS.items():
            print(f"  {name.ljust(width)}  {summary}")
        return 0
    command, rest = args[0], args[1:]
    entry = SUBCOMMANDS.get(command)
    if entry is None:
        print(f"groupcomm: unknown command {command!r}; commands: {', '.join(SUBCOMMANDS)}",
              file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(entry[0])
    except ImportError as error:
        print(f"groupcomm {command}: not available in this installation ({error})",
              file=sys.stderr)
        return 2
    return int(module.main(rest) or 0)


def entry() -> NoReturn:
    """The ``groupcomm`` process (console script, ``python -m groupcomm.cli``): :func:`main`,
    then exit. A command that handed objects to :data:`~groupcomm.cli.args.kept_until_exit`
    (the model checker's visited states and memos) exits without freeing them: freeing
    millions of small tuples one by one costs a tenth of a search, and the process is
    ending anyway."""
    cli_args.kept_until_exit = []
    code = main()
    if cli_args.kept_until_exit:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    sys.exit(code)
