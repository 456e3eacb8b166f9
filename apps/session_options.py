"""The command-line options the interactive apps share (``im``, ``edit``, ``web``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import groupcomm.cli.args as cli
from groupcomm.core.registry import get_module
from groupcomm.core.selection import (
    RELIABLE,
    Selection,
    SelectionError,
    filter_creators,
    parse_filter_spec,
    resolve,
    with_reliable,
    without_reliable,
)
from groupcomm.transport.address import EndpointError, endpoint
from groupcomm.transport.config import Connection, Pipelines
from groupcomm.transport.delays import check_delay_ms, self_delay_error


def add_session_arguments(parser: cli.ArgumentParser, application: str) -> None:
    """Add the shared options (``--name`` and ``--session`` included) to ``parser``."""
    parser.add_argument("--name", required=True, help="your name in the session")
    parser.add_argument("--session", required=True, help="session to join")
    parser.add_argument("--application", default=application,
                        help=f"application name (default {application})")
    cli.add_module_arguments(parser)
    add_reliable_argument(parser)
    cli.add_address_arguments(parser)
    parser.add_argument("--delay", action="append", default=[], metavar="PEER=MS",
                        help="minimum delay for messages to PEER (testing; repeatable)")
    parser.add_argument("--jitter", type=float, default=0.0, metavar="MS",
                        help="random extra delay per message, per-peer order kept")
    parser.add_argument("--trace-dir", help="write a trace of this run here")
    parser.add_argument("-v", "--verbose", action="count", default=0)


def add_reliable_argument(parser: cli.ArgumentParser) -> None:
    """``--no-reliable``: the apps run the ``reliable`` layer under their module unless
    given this (:func:`session_options` adds it)."""
    parser.add_argument("--no-reliable", action="store_true",
                        help="do not put the reliable layer (retransmission, acks) under "
                        "the module: frames inside a server that dies are then lost")


def app_filters(selection: Selection, no_reliable: bool, prog: str) -> list[str]:
    """The filters the apps run: the selection's, with the ``reliable`` layer once and
    first unless ``no_reliable`` (which also takes it out of an environment's or config
    file's list; given on the command line together with it, it is an error)."""
    if not no_reliable:
        return with_reliable(selection.filters)
    if selection.filters_source == "command line" and any(
            parse_filter_spec(spec)[0] == RELIABLE for spec in selection.filters):
        raise cli.CliError(f"{prog}: --no-reliable and --filter {RELIABLE} contradict "
                           "each other; give one")
    return without_reliable(selection.filters)


def parse_delay(spec: str, prog: str, me: str | None = None) -> tuple[str, float]:
    """``PEER=MS`` as (peer, milliseconds), MS as
    :func:`~groupcomm.transport.delays.check_delay_ms` takes it, PEER not ``me``."""
    peer, eq, ms = spec.partition("=")
    if not eq or not peer:
        raise cli.CliError(f"{prog}: --delay takes PEER=MS, got {spec!r}")
    if peer == me:
        raise cli.CliError(f"{prog}: --delay {spec}: {self_delay_error(peer)}")
    try:
        value = check_delay_ms("delay", ms)
    except ValueError as error:
        raise cli.CliError(f"{prog}: --delay {spec}: {error}") from None
    return peer, value


def parse_jitter(ms: float, prog: str) -> float:
    """``--jitter MS`` checked like :func:`~groupcomm.transport.delays.check_delay_ms`."""
    try:
        return check_delay_ms("jitter", ms)
    except ValueError as error:
        raise cli.CliError(f"{prog}: --jitter {ms}: {error}") from None


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
            # a gateway's delays are for every tab's messages to PEER: PEER's own tab
            # sends none to itself (a terminal app refuses its own name as it parses)
            if peer not in (communicator.name, communicator.member_id):
                communicator.set_minimum_delay_to_peer(peer, ms)
        if self.jitter:
            communicator.set_delay_variation(self.jitter)


def servers_list(text: str, prog: str) -> tuple[str, ...]:
    """``--servers``' comma-separated addresses, each checked (one ``CliError`` line)."""
    try:
        servers = tuple(endpoint(item, "--servers address")
                        for item in text.split(",") if item.strip())
    except EndpointError as error:
        raise cli.CliError(f"{prog}: {error}") from None
    if not servers:
        raise cli.CliError(f"{prog}: --servers lists no address")
    return servers


def session_options(args: argparse.Namespace, prog: str, extra_receive: list | None = None,
                    *, warn_known_bad: bool = True, **connection: Any) -> SessionOptions:
    """Check the shared options (every problem one ``CliError`` line; a known-bad module
    gets one warning line unless not ``warn_known_bad``). ``connection`` adds fields of
    the communicator's :class:`~groupcomm.transport.config.Connection`. ``extra_receive``
    goes above the ``--filter`` ones (the reliable layer stays nearest the network), just
    below the causality module."""
    delays = [parse_delay(spec, prog, args.name) for spec in args.delay]
    jitter = parse_jitter(args.jitter, prog)
    try:
        selection = resolve(args.causality, args.filter, args.config)
        selection.filters = app_filters(selection, args.no_reliable, prog)
        extra_send, extra_rcv = filter_creators(selection.filters)
    except SelectionError as error:
        raise cli.CliError(f"{prog}: {error}") from None
    cli.ensure_trace_dir(args.trace_dir, prog)
    if warn_known_bad and selection.causality:
        cli.warn_if_known_bad(get_module(selection.causality), prog)
    where: dict[str, Any] = {"server": args.server}
    if getattr(args, "servers", None):
        where = {"servers": servers_list(args.servers, prog)}
    kwargs = dict(
        **where, application=args.application, key_file=args.key_file,
        causality=selection.causality,
        pipelines=Pipelines(extra_send=extra_send,
                            extra_receive=[*extra_rcv, *(extra_receive or [])]),
        routing="direct" if args.direct else "relayed", trace_dir=args.trace_dir,
        connection=Connection(bind_host=args.bind_host, advertise_host=args.advertise_host,
                              curve_dir=args.curve_dir, **connection),
    )
    return SessionOptions(selection, kwargs, delays, jitter)
