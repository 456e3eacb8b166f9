"""Replicated data types on tagged causal delivery (no I/O).

Operation-based types whose operations carry no clock of their own: a replica applies
an operation when the communicator delivers it, reading the message's tag
(``message.app_tag``: the application-level happened-before of the send) to tell the
operations it supersedes from the concurrent ones. This is the pure op-based approach
of Baquero, Almeida and Shoker (2014): causal delivery with precise tags makes the
types' own metadata unnecessary, as Younes, Almeida and Baquero show (source 001) -
and only if the tags are precise.

Use: broadcast every operation to all members, the sender included (``to_all``), and
apply each delivery with ``replica.effect(message.user_message, message.app_tag)``;
the sender's own operation takes effect when it is delivered back, in causal order
like everyone else's. Replicas that delivered the same operations hold the same value,
whatever the order of concurrent ones.
"""

from groupcomm.replicated.types import AddWinsSet, Counter, MultiValueRegister

__all__ = ["AddWinsSet", "Counter", "MultiValueRegister"]
