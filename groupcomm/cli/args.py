"""Argument handling shared by every ``groupcomm`` subcommand.

Bad arguments raise :class:`CliError`; :func:`run_main` turns it into one line on stderr
and exit code 2, so every subcommand fails the same way.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence


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
