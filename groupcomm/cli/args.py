"""Argument handling shared by every ``groupcomm`` subcommand: bad arguments raise
:class:`CliError`, which :func:`run_main` turns into one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: where the session server listens unless told
DEFAULT_SERVER = "tcp://127.0.0.1:5555"

#: set to a list by the ``groupcomm`` process entry (:func:`groupcomm.cli.main.entry`):
#: what a command appends here is never freed, the process ends without tearing it down;
#: ``None`` when a command runs inside another program (tests), which must free it
kept_until_exit: list | None = None


class CliError(Exception):
    """A bad command line: printed as one line, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`CliError` instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{self.prog}: {message} (see {self.prog} --help)")


def run_main(build: Callable[[], ArgumentParser], body: Callable[[argparse.Namespace], int],
             argv: Sequence[str] | None) -> int:
    """Parse ``argv`` with ``build()`` and run ``body``; bad arguments give one line, exit 2."""
    try:
        return body(build().parse_args(list(argv) if argv is not None else None))
    except CliError as error:
        print(str(error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def add_flags(parser: Any, **flags: str) -> None:
    """Add each ``--name`` (underscores written as dashes) as an on/off flag with its help
    text, in the order given."""
    for name, text in flags.items():
        parser.add_argument("--" + name.replace("_", "-"), action="store_true", help=text)


def add_output_arguments(parser: Any, json_help: str = "print one JSON object") -> None:
    """``--json`` and ``-v``/``--verbose`` (counted: :func:`setup_logging`)."""
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("-v", "--verbose", action="count", default=0)


def add_module_arguments(parser: Any) -> None:
    """Where the session is and which modules run: ``--server`` or ``--servers``,
    ``--key-file``, ``--causality``, ``--filter``, ``--config``, ``--direct``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", default=DEFAULT_SERVER,
                       help=f"session server address (default {DEFAULT_SERVER})")
    where.add_argument("--servers", metavar="ADDR,ADDR,...",
                       help="several session servers (comma-separated, the same list for "
                       "every member): the session meets at the first of them in its "
                       "rendezvous order that answers (docs/deploy.md)")
    parser.add_argument("--key-file", help="session key file (default $GROUPCOMM_KEY_FILE)")
    parser.add_argument("--causality", help="causality module (see groupcomm filters); "
                        "default $GROUPCOMM_CAUSALITY, the config file, else none")
    parser.add_argument("--filter", action="append", default=[], metavar="SPEC",
                        help="extra filter, e.g. drop:p=0.05 (repeatable)")
    parser.add_argument("--config", help="config file (TOML) with causality / filters")
    parser.add_argument("--direct", action="store_true",
                        help="send peer to peer instead of through the server")


def add_address_arguments(parser: Any) -> None:
    """A member's own addresses and keys: ``--curve-dir``, ``--bind-host``,
    ``--advertise-host``."""
    parser.add_argument("--curve-dir", metavar="DIR",
                        help="per-client keys (CurveZMQ; relayed routing only): DIR holds "
                        "NAME.key_secret and server.key (see groupcomm keys)")
    parser.add_argument("--bind-host", default="127.0.0.1",
                        help="address to listen on for direct traffic (default 127.0.0.1; "
                        "0.0.0.0 for every interface)")
    parser.add_argument("--advertise-host",
                        help="address other members reach this one at (default: --bind-host)")


def setup_logging(verbose: int = 0) -> None:
    """Log to stderr: warnings by default, info with -v, debug with -vv."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


#: how a known-bad module's description starts: ``KNOWN BAD: why`` or
#: ``KNOWN BAD (source): why``
_KNOWN_BAD_PREFIX = re.compile(r"^\s*KNOWN BAD\s*(?:\(([^)]*)\))?\s*:?\s*", re.IGNORECASE)


def warn_if_known_bad(module: object | None, prog: str) -> None:
    """One warning line on stderr when the causality module instance ``module`` is
    known-bad, naming why from its description (read by attribute: this module imports
    nothing of the framework)."""
    if module is None or not getattr(module, "known_bad", False):
        return
    description = str(getattr(module, "description", "") or "")
    match = _KNOWN_BAD_PREFIX.match(description)
    why = description[match.end():].strip() if match else description.strip()
    source = f" ({match.group(1)})" if match and match.group(1) else ""
    print(f"{prog}: warning: {getattr(module, 'name', module)} is a known-bad module, "
          f"kept as a counterexample{source}: {why or 'see groupcomm filters'}; "
          "messages may be delivered out of causal order", file=sys.stderr, flush=True)


def checked_module(lookup: Callable[[str], Any], name: str, prog: str,
                   warn: bool = True) -> Any:
    """``lookup(name)`` (the registry's ``get_module``), or a :class:`CliError` naming
    ``prog`` for a name it does not know; with ``warn``, :func:`warn_if_known_bad`."""
    try:
        module = lookup(name)
    except LookupError as error:
        raise CliError(f"{prog}: {error}") from None
    if warn:
        warn_if_known_bad(module, prog)
    return module


def ensure_trace_dir(path: str | None, prog: str) -> None:
    """Create the ``--trace-dir`` ``path`` now, so that a path that cannot be created is
    one :class:`CliError` line instead of an error later."""
    if not path:
        return
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"{prog}: cannot create trace directory {path}: "
                       f"{error.strerror or error}") from None
