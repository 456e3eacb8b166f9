"""Messages, filters, pipelines, selectors, the protocol node and delays."""

from __future__ import annotations

import pytest

from groupcomm.core.causality import module_of
from groupcomm.core.filtering import (
    CallableProcessor,
    MessageFilter,
    MessageFilterCreator,
    MessageForwarder,
    MessageForwarderCreator,
    Pipeline,
    ReceivedMessageFilterSelector,
    SendMessageFilterSelector,
)
from groupcomm.core.messages import MessageError, SentMessage, Tag
from groupcomm.core.node import ProtocolNode, UnknownPeerError
from groupcomm.core.registry import get_module
from groupcomm.tools.localnet import LocalNetwork
from groupcomm.transport.delays import DelayPlan


def sent(message_id: str = "a#1", **changes: object) -> SentMessage:
    fields: dict[str, object] = dict(
        application_name="app", session_name="s", user_message="x", message_id=message_id,
        sender="a", destinations=("b",),
    )
    fields.update(changes)
    return SentMessage(**fields)  # type: ignore[arg-type]


def test_header_values_must_be_immutable() -> None:
    with pytest.raises(MessageError, match="immutable"):
        sent(headers={"v": [1, 2]})
    with pytest.raises(MessageError):
        sent(headers={"v": {"a": 1}})
    stamped = sent().with_headers(v=(1, 2))
    assert stamped.headers == {"v": (1, 2)} and sent().headers == {}


def test_tags_relate_exactly_by_vector_clock() -> None:
    a, b, c = Tag({"p": 1}), Tag({"p": 1, "q": 1}), Tag({"q": 1})
    assert a.happened_before(b) and not b.happened_before(a)
    assert a.concurrent_with(c) and not a.concurrent_with(a)


class Upper(MessageFilter[SentMessage]):
    def filter_message(self, message: SentMessage) -> None:
        self.forward(message.replace(user_message=str(message.user_message).upper()))


class Doubler(MessageFilter[SentMessage]):
    def filter_message(self, message: SentMessage) -> None:
        self.forward(message)
        self.forward(message)


def test_pipeline_runs_filters_in_order_to_the_sink() -> None:
    out: list[SentMessage] = []
    pipeline = Pipeline([Upper(), Doubler(), MessageForwarder()], CallableProcessor(out.append))
    pipeline.process_message(sent(user_message="hi"))
    assert [m.user_message for m in out] == ["HI", "HI"]
    empty: list[SentMessage] = []
    Pipeline([], CallableProcessor(empty.append)).process_message(sent())
    assert len(empty) == 1


def test_selectors_give_each_communicator_its_own_filters_and_manager() -> None:
    module = get_module("none")
    module.install()
    assert module_of(SendMessageFilterSelector.get_message_filter_creator()) is module
    nodes = [ProtocolNode(n, transmit=lambda m, d: None, clock=lambda: 0.0) for n in "ab"]
    first, second = (n.send_pipeline.filters[0] for n in nodes)
    assert first is not second
    assert first.manager is nodes[0].receive_pipeline.filters[0].manager  # shared per node
    assert first.manager is not second.manager
    SendMessageFilterSelector.reset()
    ReceivedMessageFilterSelector.reset()
    plain = ProtocolNode("c", transmit=lambda m, d: None, clock=lambda: 0.0)
    assert isinstance(plain.send_pipeline.filters[0], MessageForwarder)
    with pytest.raises(TypeError):
        SendMessageFilterSelector.set_message_filter_creator(object())  # type: ignore[arg-type]
    assert isinstance(MessageForwarderCreator().get_message_filter(plain), MessageForwarder)


def test_unknown_destination_is_a_clear_error() -> None:
    net = LocalNetwork(["a", "b"])
    with pytest.raises(UnknownPeerError, match="'zed'.*members are a, b"):
        net.send("a", "x", ["zed"])
    with pytest.raises(ValueError):
        net.send("a", "x", [])


def test_self_addressed_messages_loop_back_after_the_current_step() -> None:
    net = LocalNetwork(["a", "b"])
    net.send("a", "hello", ["a", "b"])
    assert net.delivered_payloads("a") == ["hello"]
    net.run()
    assert net.delivered_payloads("b") == ["hello"]


def test_send_from_a_callback_is_tagged_at_the_call() -> None:
    """001, callback model: b answers m1 while m2 is also ready; the answer must be
    concurrent with m2, not after it."""
    net = LocalNetwork(["a", "b", "c"])
    answered: list[SentMessage] = []

    def answer_first(network: LocalNetwork, me: str, message) -> None:
        if message.user_message == "m1":
            answered.append(network.send(me, "reply", ["a"]))

    net.reactions["b"].append(answer_first)
    m1 = net.send("a", "m1", ["b"])
    m2 = net.send("c", "m2", ["b"])
    # both arrive before b's application runs: deliver frames in one go
    node_b = net.nodes["b"]
    node_b._draining = True  # noqa: SLF001 - hold b's loop so both become ready together
    net.deliver(0)
    net.deliver(0)
    node_b._draining = False  # noqa: SLF001
    node_b.drain()
    (reply,) = answered
    tag = Tag(reply.vc)
    assert Tag(m1.vc).happened_before(tag)
    assert Tag(m2.vc).concurrent_with(tag)


def test_node_snapshot_restores_clock_and_ids() -> None:
    net = LocalNetwork(["a", "b"])
    node = net.nodes["a"]
    before = node.snapshot()
    net.send("a", "x", ["b"])
    assert node.snapshot() != before
    node.restore(before)
    assert node.snapshot() == before


def test_delay_plan_keeps_fifo_under_jitter() -> None:
    plan = DelayPlan(seed=3)
    plan.set_minimum_delay("carol", 100)
    plan.set_jitter(50, keep_fifo=True)
    for i in range(20):
        assert plan.schedule(0.0, "carol", i)
    out = [item for _, item in plan.pop_due(10.0)]
    assert out == list(range(20))
    plan.set_minimum_delay("carol", 0)
    plan.set_jitter(0)
    assert not plan.schedule(20.0, "bob", "now")
    with pytest.raises(ValueError):
        plan.set_minimum_delay("x", -1)


def test_delay_plan_without_fifo_can_reorder() -> None:
    plan = DelayPlan(seed=1)
    plan.set_jitter(100, keep_fifo=False)
    for i in range(50):
        plan.schedule(0.0, "bob", i)
    out = [item for _, item in plan.pop_due(1.0)]
    assert sorted(out) == list(range(50)) and out != list(range(50))


def test_node_delivers_through_the_callback_given_at_construction() -> None:
    """``deliver=`` replaces the callback model; the host advances the clock itself, and
    work queued with queue_sends waits for drain; discard_queued drops queued work."""
    sent: list[tuple[SentMessage, tuple[str, ...]]] = []
    delivered = []

    def deliver(message) -> None:
        node.application_delivered(message)
        delivered.append(message)

    node = ProtocolNode("a", transmit=lambda m, d: sent.append((m, d)), clock=lambda: 0.0,
                        deliver=deliver)
    node.message_listeners.append(lambda m: pytest.fail("the callback model is not used"))
    node.client_joined("a", all_users=["a", "b"])
    message = node.tag_sends("x", ["a", "b"])[0]
    node.queue_sends([message])
    assert not node.idle and not sent
    node.drain()
    assert [d for _, d in sent] == [("b",)]
    assert [m.message_id for m in delivered] == [message.message_id]
    assert node.application_clock == {"a": 2}
    node.queue_sends(node.tag_sends("y", ["b"]))
    node.discard_queued()
    assert node.idle


class _Upper(MessageFilter):
    def filter_message(self, message) -> None:
        if message.is_user_message() and isinstance(message.user_message, str):
            message = message.replace(user_message=message.user_message.upper())
        self.forward(message)


class _UpperCreator(MessageFilterCreator):
    def get_message_filter(self, host) -> _Upper:
        return _Upper()


def test_a_selector_that_replaces_half_of_an_installed_module_is_refused() -> None:
    import groupcomm
    from groupcomm.core.causality import ModuleMismatchError

    groupcomm.install("matrix")
    SendMessageFilterSelector.set_message_filter_creator(_UpperCreator())
    with pytest.raises(ModuleMismatchError, match="the send side holds no causality module "
                                                  "and the receive side 'matrix'.*extra_send"):
        ProtocolNode("alice", transmit=lambda message, dests: None, clock=lambda: 0.0)
    # the supported way: the module on both sides, the filter beside it
    module = groupcomm.get_module("matrix")
    node = ProtocolNode("alice", transmit=lambda message, dests: None, clock=lambda: 0.0,
                        send_creators=[module.send_creator(), _UpperCreator()],
                        receive_creators=[module.receive_creator()])
    assert node.module is not None and node.module.name == "matrix"
