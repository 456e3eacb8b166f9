"""``groupcomm filters``: what causality modules and extra filters are installed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from groupcomm.cli.args import ArgumentParser, CliError, run_main
from groupcomm.core.registry import available_filters, available_modules


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm filters",
        description="List the installed causality modules and extra filters, with one line "
        "of description each and the plugin they come from.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _run(args: argparse.Namespace) -> int:
    try:
        modules = available_modules()
        filters = available_filters()
    except RuntimeError as error:  # a broken plugin names itself
        raise CliError(f"groupcomm filters: {error}") from None
    if args.json:
        print(json.dumps({
            "causality_modules": [
                {"name": m.name, "description": m.description, "origin": m.origin}
                for m in sorted(modules.values(), key=lambda m: m.name)
            ],
            "filters": [
                {"name": f.name, "description": f.description, "origin": f.origin,
                 "sides": [s for s in ("send", "receive") if getattr(f, s)]}
                for f in sorted(filters.values(), key=lambda f: f.name)
            ],
        }))
        return 0
    width = max([len(n) for n in (*modules, *filters)] + [4])
    print("causality modules (--causality NAME):")
    for info in sorted(modules.values(), key=lambda m: m.name):
        print(f"  {info.name.ljust(width)}  {info.description}  [{info.origin}]")
    print("extra filters (--filter NAME):")
    if not filters:
        print("  (none installed)")
    for info in sorted(filters.values(), key=lambda f: f.name):
        print(f"  {info.name.ljust(width)}  {info.description}  [{info.origin}]")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``groupcomm filters [--json]``."""
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
