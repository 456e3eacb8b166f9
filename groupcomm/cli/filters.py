"""``groupcomm filters``: what causality modules and extra filters are installed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from groupcomm.cli.args import ArgumentParser, run_main
from groupcomm.core.registry import available_filters, available_modules, plugin_failures


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm filters",
        description="List the installed causality modules and extra filters, with one line "
        "of description each and the plugin they come from, and the plugins that failed to "
        "load, one line each with their error (the listing still exits 0).",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _run(args: argparse.Namespace) -> int:
    modules = available_modules()
    filters = available_filters()
    failures = plugin_failures()  # a broken plugin is listed, not fatal
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
            "failed_plugins": [
                {"name": f.name, "distribution": f.distribution, "module": f.module,
                 "error": f.error}
                for f in failures
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
    if failures:
        print("plugins that failed to load:")
        for failure in failures:
            print(f"  {failure}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``groupcomm filters [--json]``."""
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
