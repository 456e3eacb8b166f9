"""The command-line options every interactive app shares (``im``, ``edit``): where the
session is, which causality module and filters, routing, keys, injected delays, traces."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_address_arguments,
    add_module_arguments,
    ensure_trace_dir,
    warn_if_known_bad,
)
from groupcomm.core.registry import get_module
from groupcomm.core.selection import Selection, SelectionError, filter_creators, resolve
from groupcomm.transport.config import Connection, Pipelines
from groupcomm.transport.delays import check_delay_ms, self_delay_error


def add_session_arguments(parser: ArgumentParser, application: str) -> None:
    """Add the shared options (``--name`` and ``--session`` included) to ``parser``."""
    parser.add_argument("--name", required=True, help="your name in the session")
    parser.add_argument("--session", required=True, help="session to join")
    parser.add_argument("--application", default=application,
                        help=f"application name (default {application})")
    add_module_arguments(parser)
    add_address_arguments(parser)
    parser.add_argument("--delay", action="append", default=[], metavar="PEER=MS",
                        help="minimum delay for messages to PEER (testing; repeatable)")
    parser.add_argument("--jitter", type=float, default=0.0, metavar="MS",
                        help="random extra delay per message, per-peer order kept")
    parser.add_argument("--trace-dir", help="write a trace of this run here")
    parser.add_argument("-v", "--verbose", action="count", default=0)


def parse_delay(spec: str, prog: str, me: str | None = None) -> tuple[str, float]:
    """``PEER=MS`` as (peer, milliseconds); a :class:`CliError` naming ``prog`` if not
    (MS as :func:`~groupcomm.transport.delays.check_delay_ms` takes it, PEER not ``me``)."""
    peer, eq, ms = spec.partition("=")
    if not eq or not peer:
        raise CliError(f"{prog}: --delay takes PEER=MS, got {spec!r}")
    if peer == me:
        raise CliError(f"{prog}: --delay {spec}: {self_delay_error(peer)}")
    try:
        value = check_delay_ms("delay", ms)
    except ValueError as error:
        raise CliError(f"{prog}: --delay {spec}: {error}") from None
    return peer, value


def parse_jitter(ms: float, prog: str) -> float:
    """``--jitter MS`` checked like :func:`~groupcomm.transport.delays.check_delay_ms`."""
    try:
        return check_delay_ms("jitter", ms)
    except ValueError as error:
        raise CliError(f"{prog}: --jitter {ms}: {error}") from None


@dataclass
class SessionOptions:
    """The parsed shared options: the module selection, the communicator's keyword
    arguments, and the delays to inject once it is built."""

    selection: Selection
    communicator_kwargs: dict[str, Any]
    delays: list[tuple[str, float]]
    jitter: float

    def inject_delays(self, communicator: Any) -> None:
        for peer, ms in self.delays:
            communicator.set_minimum_delay_to_peer(peer, ms)
        if self.jitter:
            communicator.set_delay_variation(self.jitter)


def session_options(args: argparse.Namespace, prog: str, extra_receive: list | None = None,
                    *, warn_known_bad: bool = True, **connection: Any) -> SessionOptions:
    """Check the shared options; every problem is one :class:`CliError` line. A
    known-bad module gets one warning line on stderr (unless not ``warn_known_bad``:
    the caller refuses it or warns later). ``connection`` adds fields of the
    communicator's :class:`~groupcomm.transport.config.Connection` (``max_frame``)."""
    delays = [parse_delay(spec, prog, args.name) for spec in args.delay]
    jitter = parse_jitter(args.jitter, prog)
    try:
        selection = resolve(args.causality, args.filter, args.config)
        extra_send, extra_rcv = filter_creators(selection.filters)
    except SelectionError as error:
        raise CliError(f"{prog}: {error}") from None
    ensure_trace_dir(args.trace_dir, prog)
    if warn_known_bad and selection.causality:
        warn_if_known_bad(get_module(selection.causality), prog)
    kwargs = dict(
        server=args.server, application=args.application, key_file=args.key_file,
        causality=selection.causality,
        pipelines=Pipelines(extra_send=extra_send,
                            extra_receive=[*(extra_receive or []), *extra_rcv]),
        routing="direct" if args.direct else "relayed", trace_dir=args.trace_dir,
        connection=Connection(bind_host=args.bind_host, advertise_host=args.advertise_host,
                              curve_dir=args.curve_dir, **connection),
    )
    return SessionOptions(selection, kwargs, delays, jitter)
