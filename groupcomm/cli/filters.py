"""``groupcomm filters``: what causality modules and extra filters are installed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from groupcomm.cli.args import ArgumentParser, run_main
from groupcomm.core.registry import available_filters, available_modules, plugin_failures


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm filters",
        description="List the installed causality modules and extra filters, with one line "
        "of description each, the plugin they come from, each module's flags (known-bad, "
        "broadcast-only, sender-side, unicast-events, symmetry, commuting-controls) and "
        "each filter's typed options, and the plugins that failed to "
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
                {"name": m.name, "description": m.description, "origin": m.origin,
                 "flags": list(m.flags)}
                for m in sorted(modules.values(), key=lambda m: m.name)
            ],
            "filters": [
                {"name": f.name, "description": f.description, "origin": f.origin,
                 "sides": [s for s in ("send", "receive") if getattr(f, s)],
                 "options": [{"name": o.name, "type": o.type.__name__,
                              "default": o.default, "help": o.help} for o in f.options]}
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
        flags = f"  ({', '.join(info.flags)})" if info.flags else ""
        print(f"  {info.name.ljust(width)}  {info.description}  [{info.origin}]{flags}")
    print("extra filters (--filter NAME):")
    if not filters:
        print("  (none installed)")
    for info in sorted(filters.values(), key=lambda f: f.name):
        print(f"  {info.name.ljust(width)}  {info.description}  [{info.origin}]")
        for option in info.options:
            print(f"  {''.ljust(width)}    {option.name}: {option.describe()}")
    if failures:
        print("plugins that failed to load:")
        for failure in failures:
            print(f"  {failure}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)
