"""Argument handling shared by every ``groupcomm`` subcommand.

Bad arguments raise :class:`CliError`; :func:`run_main` turns it into one line on stderr
and exit code 2, so every subcommand fails the same way.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


class CliError(Exception):
    """A bad command line: printed as one line, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`CliError` instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{self.prog}: {message} (see {self.prog} --help)")


def run_main(
    build: Callable[[], ArgumentParser],
    body: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
) -> int:
    """Parse ``argv`` with ``build()`` and run ``body``; bad arguments give one line, exit 2."""
    try:
        args = build().parse_args(list(argv) if argv is not None else None)
    except CliError as error:
        print(str(error), file=sys.stderr)
        return 2
    try:
        return body(args)
    except CliError as error:
        print(str(error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def setup_logging(verbose: int = 0) -> None:
    """Log to stderr: warnings by default, info with -v, debug with -vv."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


#: how a known-bad module's description starts: ``KNOWN BAD: why`` or
#: ``KNOWN BAD (source): why``
_KNOWN_BAD_PREFIX = re.compile(r"^\s*KNOWN BAD\s*(?:\(([^)]*)\))?\s*:?\s*", re.IGNORECASE)


def known_bad_warning(module: object | None, prog: str) -> str | None:
    """The one warning line for the causality module instance ``module`` when it is
    known-bad (kept because it violates causal order:
    :attr:`~groupcomm.core.causality.CausalityModule.known_bad`), naming why from its
    description; ``None`` for any other module or none. (Read by attribute: this module
    imports nothing of the framework.)"""
    if module is None or not getattr(module, "known_bad", False):
        return None
    description = str(getattr(module, "description", "") or "")
    match = _KNOWN_BAD_PREFIX.match(description)
    why = description[match.end():].strip() if match else description.strip()
    source = f" ({match.group(1)})" if match and match.group(1) else ""
    return (f"{prog}: warning: {getattr(module, 'name', module)} is a known-bad module, "
            f"kept as a counterexample{source}: {why or 'see groupcomm filters'}; "
            "messages may be delivered out of causal order")


def warn_if_known_bad(module: object | None, prog: str) -> None:
    """Print :func:`known_bad_warning`'s line on stderr when there is one."""
    line = known_bad_warning(module, prog)
    if line:
        print(line, file=sys.stderr, flush=True)


def ensure_trace_dir(path: str | None, prog: str) -> None:
    """Create the ``--trace-dir`` ``path`` (and its parents) now, so that a path that
    cannot be created is one :class:`CliError` line instead of an error later."""
    if not path:
        return
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"{prog}: cannot create trace directory {path}: "
                       f"{error.strerror or error}") from None
