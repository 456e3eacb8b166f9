"""``groupcomm keys DIR NAME [NAME ...]``: create CurveZMQ key pairs (see
:mod:`groupcomm.transport.curve` for the directory layout and what each party needs)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from groupcomm.cli.args import ArgumentParser, CliError, run_main
from groupcomm.transport.curve import CurveKeyError, create_keys


def main(argv: Sequence[str] | None = None) -> int:
    def build() -> ArgumentParser:
        parser = ArgumentParser(
            prog="groupcomm keys",
            description="Create CurveZMQ key pairs for per-client authentication: one "
            "for the server (name it 'server') and one per client name. Give the server "
            "server.key_secret and every NAME.key; give each client its NAME.key_secret "
            "and server.key.")
        parser.add_argument("directory")
        parser.add_argument("names", nargs="+", metavar="NAME")
        return parser

    def body(args: argparse.Namespace) -> int:
        try:
            made = create_keys(args.directory, args.names)
        except CurveKeyError as error:
            raise CliError(f"groupcomm keys: {error}") from None
        for path in made:
            print(path)
        return 0

    return run_main(build, body, argv)
