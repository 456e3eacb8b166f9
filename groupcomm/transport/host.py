"""Several members in one process on one poll thread (a web gateway's tabs): :class:`Host`.
Listeners of every member run on that thread, one at a time: a slow listener delays
every member of the host."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zmq

from groupcomm.transport.communicator import Communicator
from groupcomm.transport.loop import PollLoop
from groupcomm.wire.shared_batches import SharedBatches
from groupcomm.wire.streams import SharedStreams

__all__ = ["Host"]


class Host:
    """One poll thread and ZeroMQ context for any number of members, each closed on its own."""

    def __init__(self, *, context: zmq.Context | None = None, name: str = "host") -> None:
        self._loop = PollLoop(context=context, name=name)
        # its members receive the same chunks of each stream and the same batches:
        # inflated and unpacked once
        self._loop.shared_streams = SharedStreams()
        self._loop.shared_batches = SharedBatches()
        self._members: list[Communicator] = []
        self._closed = False

    @property
    def sharing(self) -> dict[str, int]:
        """What its members did once for all: chunks inflated and batches unpacked, and
        how often a member took one already done (``/stats`` of a gateway)."""
        streams, batches = self._loop.shared_streams, self._loop.shared_batches
        assert streams is not None and batches is not None
        return {"chunks_inflated": streams.inflated, "chunks_reused": streams.reused,
                "batches_unpacked": batches.unpacked, "batches_reused": batches.reused}

    def join(self, name: str, session: str, **options: Any) -> Communicator:
        """A member ``name`` of ``session`` on this host's thread: ``options`` are
        :class:`Communicator`'s, but ``context`` and ``loop`` (the host's). Raises what
        the constructor raises."""
        if self._closed:
            raise RuntimeError("this host is closed")
        for own in ("context", "loop"):
            if own in options:
                raise ValueError(f"{own} is the host's: give it to Host(), not to join()")
        member = Communicator(name, session, loop=self._loop, **options)
        self._members.append(member)
        return member

    def after_turns(self, function: Callable[[], None]) -> None:
        """Run ``function`` on the host's thread after each round of the members' turns
        (their listeners' work of one round can then leave in one go)."""
        self._loop.after_turns.append(function)

    def on_thread(self) -> bool:
        """Whether this is the host's thread (where the members' listeners run)."""
        return self._loop.on_thread()

    @property
    def members(self) -> list[Communicator]:
        """The members joined through this host and not closed yet."""
        self._members = [m for m in self._members if not m.closed]
        return list(self._members)

    def close(self, timeout: float = 2.0) -> None:
        """Close every member still open (each leaves its session), then the thread."""
        if self._closed:
            return
        self._closed = True
        for member in self._members:
            member.close(timeout)
        self._members.clear()
        self._loop.close(timeout)

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
