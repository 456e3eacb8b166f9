"""The apps' shared options put the reliable layer under the module by default: once,
before any fault filter; ``--no-reliable`` takes it out."""

from __future__ import annotations

import pytest

from groupcomm.apps.session_options import add_session_arguments, session_options
from groupcomm.cli.args import ArgumentParser, CliError
from groupcomm.core.selection import FILTERS_ENV, with_reliable
from groupcomm.layers.faults import FaultCreator
from groupcomm.layers.reliable import _ReliableCreator
from groupcomm.web.cli import build_parser as web_parser


def filters(*argv: str) -> list[str]:
    parser = ArgumentParser(prog="test")
    add_session_arguments(parser, "test")
    args = parser.parse_args(["--name", "a", "--session", "s", *argv])
    return session_options(args, "test").selection.filters


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv(FILTERS_ENV, raising=False)
    monkeypatch.delenv("GROUPCOMM_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no groupcomm.toml


def test_the_default_is_the_reliable_layer_alone() -> None:
    assert filters() == ["reliable"]
    assert filters("--causality", "matrix") == ["reliable"]


def test_reliable_comes_once_and_before_the_fault_filters() -> None:
    assert filters("--filter", "drop:p=0.1", "--filter", "reorder:p=0.1") == [
        "reliable", "drop:p=0.1", "reorder:p=0.1"]
    assert filters("--filter", "reliable") == ["reliable"]
    # listed after a fault filter, it is moved above it
    assert filters("--filter", "duplicate:p=0.1", "--filter", "reliable") == [
        "reliable", "duplicate:p=0.1"]
    assert with_reliable(["reliable", "drop:p=0.1", "reliable"]) == ["reliable", "drop:p=0.1"]
    assert with_reliable(["drop:p=0.1", "reliable:x=1"]) == ["reliable:x=1", "drop:p=0.1"]


def test_the_filters_built_are_the_layer_nearest_the_module() -> None:
    parser = ArgumentParser(prog="test")
    add_session_arguments(parser, "test")
    args = parser.parse_args(["--name", "a", "--session", "s", "--filter", "drop:p=0.1",
                              "--filter", "reorder:p=0.1"])
    pipelines = session_options(args, "test").communicator_kwargs["pipelines"]
    # send: module, reliable, drop (toward the network); receive: the reverse order
    send, receive = pipelines.extra_send, pipelines.extra_receive
    assert [type(c) for c in send] == [_ReliableCreator, FaultCreator], send
    assert [type(c) for c in receive] == [FaultCreator, _ReliableCreator], receive
    assert send[0].side == "send" and receive[-1].side == "receive"


def test_an_apps_own_receive_filters_sit_above_the_layer() -> None:
    """The editor's jitter buffer for cursors (``latest_value``) goes between the layer
    and the module: the layer below it drops resent copies and puts each sender's
    values in order before the buffer decides which one is the newest."""
    from groupcomm.filters.latest_value import LatestValueCreator

    parser = ArgumentParser(prog="test")
    add_session_arguments(parser, "test")
    args = parser.parse_args(["--name", "a", "--session", "s", "--filter", "reorder:p=0.1"])
    own = LatestValueCreator(lambda payload: None)
    receive = session_options(args, "test", extra_receive=[own]).communicator_kwargs[
        "pipelines"].extra_receive
    assert [type(c) for c in receive] == [FaultCreator, _ReliableCreator, LatestValueCreator]


def test_no_reliable_opts_out(monkeypatch: pytest.MonkeyPatch) -> None:
    assert filters("--no-reliable") == []
    assert filters("--no-reliable", "--filter", "drop:p=0.1") == ["drop:p=0.1"]
    # from the environment (or a config file) it is taken out too
    monkeypatch.setenv(FILTERS_ENV, "reliable;drop:p=0.1")
    assert filters("--no-reliable") == ["drop:p=0.1"]
    assert filters() == ["reliable", "drop:p=0.1"]


def test_no_reliable_with_filter_reliable_is_a_one_line_error() -> None:
    with pytest.raises(CliError, match="--no-reliable and --filter reliable contradict"):
        filters("--no-reliable", "--filter", "reliable")


def test_the_web_gateway_has_the_opt_out() -> None:
    args = web_parser().parse_args(["--session", "s", "--users", "u.json", "--no-reliable"])
    assert args.no_reliable is True
    assert web_parser().parse_args(["--session", "s", "--users", "u.json"]).no_reliable is False


def _kwargs(*argv: str) -> dict:
    parser = ArgumentParser(prog="test")
    add_session_arguments(parser, "test")
    args = parser.parse_args(["--name", "a", "--session", "s", *argv])
    return session_options(args, "test").communicator_kwargs


def test_servers_lists_several_session_servers() -> None:
    kwargs = _kwargs("--servers", "127.0.0.1:7001, tcp://127.0.0.1:7002")
    assert kwargs["servers"] == ("tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002")
    assert "server" not in kwargs
    assert _kwargs("--server", "127.0.0.1:7001")["server"] == "127.0.0.1:7001"
    web = web_parser().parse_args(["--users", "u", "--session", "s",
                                   "--servers", "tcp://127.0.0.1:1,tcp://127.0.0.1:2"])
    assert web.servers == "tcp://127.0.0.1:1,tcp://127.0.0.1:2"


def test_bad_servers_are_one_line_errors() -> None:
    with pytest.raises(CliError, match="--servers address 'nowhere'"):
        _kwargs("--servers", "127.0.0.1:7001,nowhere")
    with pytest.raises(CliError, match="lists no address"):
        _kwargs("--servers", " , ")
    with pytest.raises(CliError, match="--servers: not allowed with argument --server"):
        _kwargs("--server", "127.0.0.1:1", "--servers", "127.0.0.1:2")
