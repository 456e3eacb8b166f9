"""What one conformance check found, and what a module declares it promises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the orders a module can promise (``delivery_order`` on its class; ``causal`` when it
#: declares none): what the checks hold it to
ORDERS = ("causal", "fifo", "arrival")

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"


@dataclass
class Outcome:
    """One check's result: ``pass``, ``fail`` (with a counterexample) or ``n/a`` (the
    module's flags say the check does not apply; ``detail`` says why)."""

    check: str
    status: str
    detail: str = ""
    #: the steps that show a failure, one line each (empty unless it failed)
    counterexample: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "detail": self.detail,
                "counterexample": self.counterexample, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Declared:
    """The flags a module declares, as the checks read them (never its name)."""

    name: str
    known_bad: bool
    broadcast_only: bool
    #: a send to several is that many unicasts, each its own event (mfss, cykas)
    unicast_events: bool
    #: waits for acknowledgements: holds its own sends, never a peer's (mfss, cykas)
    sender_side: bool
    #: declares its headers for ``check --symmetry`` on its own class
    symmetry: bool
    #: ``causal``, ``fifo`` or ``arrival``
    order: str

    @classmethod
    def of(cls, module: Any) -> Declared:
        kind = type(module)
        order = getattr(kind, "delivery_order", "causal")
        if order not in ORDERS:
            raise ValueError(f"{kind.__name__} declares delivery_order {order!r}; "
                             f"expected one of {', '.join(ORDERS)}")
        return cls(
            name=kind.name,
            known_bad=bool(getattr(kind, "known_bad", False)),
            broadcast_only=bool(getattr(kind, "broadcast_only", False)),
            unicast_events=bool(getattr(kind, "unicast_events", False)),
            sender_side=bool(getattr(kind, "acknowledged_sends", False)),
            symmetry=kind.__dict__.get("symmetry_headers") is not None,
            order=order,
        )
