"""``groupcomm overhead --pipeline N``: the CPU each causality module's own code costs
per message: two :class:`~groupcomm.core.node.ProtocolNode` s in one process, batches of
32 packed into frame bodies and back, each side's CPU summed apart. Signing, sockets and
wake-ups are left out for every module alike, so the differences are the modules' own
(and sender-side modules get each ACK at once: their CPU, not their round trip)."""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

from groupcomm.core.messages import SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import get_module
from groupcomm.wire.envelopes import pack_envelopes, unpack_envelopes

BATCH = 32
#: a P body's size limit here: large enough that a batch of small messages is one body
_BUDGET = 1 << 20
SENDER, RECEIVER = "sender", "receiver"


def _pair(module: str) -> tuple[ProtocolNode, ProtocolNode, list, list, list]:
    mod = get_module(module)
    outboxes: dict[str, list[SentMessage]] = {SENDER: [], RECEIVER: []}
    delivered: list[int] = [0]

    def node(name: str) -> ProtocolNode:
        out = outboxes[name]
        return ProtocolNode(name, application="bench", session="bench",
                            transmit=lambda message, _dests: out.append(message),
                            clock=lambda: 0.0, send_creators=[mod.send_creator()],
                            receive_creators=[mod.receive_creator()])

    sender, receiver = node(SENDER), node(RECEIVER)

    def count(_message: Any) -> None:
        delivered[0] += 1

    receiver.message_listeners.append(count)
    for member in (sender, receiver):
        member.client_joined(SENDER, is_new_session=True, all_users=(SENDER,))
        member.client_joined(RECEIVER, all_users=(SENDER, RECEIVER))
    return sender, receiver, outboxes[SENDER], outboxes[RECEIVER], delivered


def _hand_over(out: list[SentMessage], to: ProtocolNode) -> tuple[float, float]:
    """Pack what ``out`` holds (CPU charged to its side) and deliver it at ``to``
    (charged to the other); the two CPU times."""
    if not out:
        return 0.0, 0.0
    clock = time.process_time
    start = clock()
    bodies = list(pack_envelopes(out, _BUDGET))
    out.clear()
    packed = clock()
    for body in bodies:
        messages = unpack_envelopes(body, to.name)[3]
        to.arrived_many(messages)
        to.drain()
    return packed - start, clock() - packed


def measure_pipeline(module: str, messages: int) -> dict[str, float]:
    """CPU µs per message of the sending and the receiving side for ``module``, with the
    cyclic garbage collector paused (its passes cost by the size of the whole heap, which
    here depends on what ran before in the process, not on the module: with it running,
    one module's figure moved by a quarter between runs)."""
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return _measure(module, messages)
    finally:
        if collecting:
            gc.enable()


def _measure(module: str, messages: int) -> dict[str, float]:
    sender, receiver, sender_out, receiver_out, delivered = _pair(module)
    # the join's own control traffic (vector's bases) settles before the clock starts
    while sender_out or receiver_out:
        _hand_over(sender_out, receiver)
        _hand_over(receiver_out, sender)
    delivered[0] = 0
    clock = time.process_time
    send = receive = 0.0
    payloads = [{"i": i, "text": "x" * 32} for i in range(BATCH)]
    sent = 0
    while sent < messages:
        batch = min(BATCH, messages - sent)
        start = clock()
        for payload in payloads[:batch]:
            sender.submit(sender.tag_unicast(payload, RECEIVER))
        send += clock() - start
        sent += batch
        # until nothing is in flight (ACK-waiting modules send one at a time)
        while sender_out or receiver_out:
            packing, arriving = _hand_over(sender_out, receiver)
            send, receive = send + packing, receive + arriving
            packing, arriving = _hand_over(receiver_out, sender)
            receive, send = receive + packing, send + arriving
    if delivered[0] != messages:
        raise RuntimeError(f"{module}: {delivered[0]} of {messages} messages delivered")
    return {"send_us": send / messages * 1e6, "receive_us": receive / messages * 1e6}


def measure_pipelines(modules: list[str], messages: int, repeat: int) -> list[dict[str, Any]]:
    """Each module's :func:`measure_pipeline`, the modules taking turns in each repeat,
    the least CPU of each side kept; ratios against the first module (``none``) of the
    busier side's CPU (``cost_relative_to_none``: none's CPU divided by the module's)."""
    best: dict[str, dict[str, float]] = {}
    for turn in range(repeat):
        for module in modules:
            print(f"pipeline: {module} ({turn + 1}/{repeat})...", file=sys.stderr, flush=True)
            run = measure_pipeline(module, messages)
            kept = best.setdefault(module, run)
            for side in ("send_us", "receive_us"):
                kept[side] = min(kept[side], run[side])
    rows = []
    for module in modules:
        send, receive = best[module]["send_us"], best[module]["receive_us"]
        rows.append({"module": module, "send_us_per_msg": round(send, 2),
                     "receive_us_per_msg": round(receive, 2),
                     "busier_us_per_msg": round(max(send, receive), 2)})
    base = rows[0]
    for row in rows:
        # the module's own cost: what it adds to none's path on each side
        row["send_extra_us"] = round(row["send_us_per_msg"] - base["send_us_per_msg"], 2)
        row["receive_extra_us"] = round(
            row["receive_us_per_msg"] - base["receive_us_per_msg"], 2)
        row["send_relative_to_none"] = round(base["send_us_per_msg"] / row["send_us_per_msg"], 3)
        row["receive_relative_to_none"] = round(
            base["receive_us_per_msg"] / row["receive_us_per_msg"], 3)
        row["cost_relative_to_none"] = round(
            base["busier_us_per_msg"] / row["busier_us_per_msg"], 3)
    return rows
