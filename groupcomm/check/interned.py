"""How the model keeps the parts of its states once: node snapshots in a table per process
(a state holds their ids), one shared copy of each equal truth entry, whole truth and
network entry (less memory, and comparisons that end at the identity test); states
packed into bytes that name their parts (the frontier of a compact search); the tables a
checkpoint keeps.
"""

from __future__ import annotations

from array import array
from typing import Any

from groupcomm.check.state import ValuePool, exact


class InternedStates:
    """The tables of the parts of states, for ``n`` processes (the base of the model)."""

    def __init__(self, n: int) -> None:
        self.n = n
        #: one copy of each equal part of what the tables below keep (memory)
        self.pool = ValuePool()
        #: per process: interned snapshots (id -> snapshot, snapshot -> id)
        self.snapshots: list[dict[int, tuple]] = [{} for _ in range(n)]
        self._snap_ids: list[dict[tuple, int]] = [{} for _ in range(n)]
        #: network entries and truth entries, one copy each
        self._values: dict[Any, Any] = {}
        #: whole truths, one copy each, and the same by id (see :meth:`is_one_truth`)
        self._truth_tuples: dict[tuple, tuple] = {}
        self._truth_ids: dict[int, tuple] = {}
        #: compact states (:meth:`pack`): id() of a truth or network entry -> its number,
        #: and the entries by number (which also keeps them alive)
        self._numbers: dict[int, int] = {}
        self._numbered: list[Any] = []

    def intern(self, i: int, snap: tuple) -> int:
        """The id of snapshot ``snap`` of process ``i`` (added when new)."""
        table = self._snap_ids[i]
        key = exact(snap)
        found = table.get(key)
        if found is None:
            snaps = self.snapshots[i]
            found = len(snaps)
            share = self.pool.share
            table[share(key)] = found
            snaps[found] = share(snap)
        return found

    def shared(self, value: Any) -> Any:
        """The one copy of ``value``, a network or truth entry, the states of this model
        share (added, its parts pooled, when new)."""
        found = self._values.get(value)
        if found is None:
            found = self.pool.share(value)
            self._values[found] = found
        return found

    def one_truth(self, truth: tuple) -> tuple:
        """The one copy of the whole truth ``truth`` (a tuple of shared truth entries)
        the states of this model share; it lives as long as the model."""
        found = self._truth_tuples.setdefault(truth, truth)
        self._truth_ids[id(found)] = found
        return found

    def is_one_truth(self, truth: tuple) -> bool:
        """Whether ``truth`` is the model's own copy (:meth:`one_truth`), by identity."""
        return self._truth_ids.get(id(truth)) is truth

    def pack(self, state: tuple) -> bytes:
        """``state`` as bytes: 32-bit snapshot ids, then numbers standing for its truth
        entries and network entries (the objects the states share). Unordered networks
        only; :meth:`unpack` gives back an equal state."""
        snaps, network, truth = state
        numbers = self._numbers
        out = list(snaps)
        for entry in (*truth, *network):
            number = numbers.get(id(entry))
            if number is None:
                number = numbers[id(entry)] = len(self._numbered)
                self._numbered.append(entry)  # (which keeps it alive: its id stays its own)
            out.append(number)
        return array("I", out).tobytes()

    def unpack(self, packed: bytes) -> tuple:
        """The state :meth:`pack` made ``packed`` from."""
        values = array("I")
        values.frombytes(packed)
        n = self.n
        numbered = self._numbered
        return (tuple(values[:n]), tuple([numbered[k] for k in values[2 * n:]]),
                tuple([numbered[k] for k in values[n:2 * n]]))

    def tables(self) -> dict[str, Any]:
        """What packed states and state keys refer to (interned snapshots, numbered
        entries): a checkpoint saves it, :meth:`restore_tables` puts it back."""
        return {"snapshots": self.snapshots, "numbered": self._numbered}

    def restore_tables(self, tables: dict[str, Any]) -> None:
        """Continue with the tables of a checkpoint of the same model (a superset of
        this fresh model's: interning is deterministic)."""
        # the pool anew: a checkpoint keeps the sharing inside its tables, and what this
        # search adds shares with them
        self.pool = ValuePool()
        share = self.pool.share
        self.snapshots = [{k: share(snap) for k, snap in table.items()}
                          for table in tables["snapshots"]]
        self._snap_ids = [{share(exact(snap)): k for k, snap in table.items()}
                          for table in self.snapshots]
        self._numbered = tables["numbered"]
        self._numbers = {id(entry): k for k, entry in enumerate(self._numbered)}
