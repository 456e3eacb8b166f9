"""Replicated data types on tagged causal delivery (no I/O).

Operation-based types whose operations carry no clock of their own: a replica applies
an operation when the communicator delivers it, reading the message's tag
(``message.app_tag``: the application-level happened-before of the send) to tell the
operations it supersedes from the concurrent ones. This is the pure op-based approach
of Baquero, Almeida and Shoker (2014): causal delivery with precise tags makes the
types' own metadata unnecessary, as Younes, Almeida and Baquero show (source 001) -
and only if the tags are precise.

Use: the replica that makes an operation applies it at once with the tag of its send,
then broadcasts it to the other members; each of them applies it when it is delivered::

    op = text.prepare_insert(3, "x")
    first = communicator.send(communicator.others, op)[0]
    text.effect(op, Tag(first.vc), first.message_id)    # at the source, at once
    # on delivery elsewhere:
    text.effect(message.user_message, message.app_tag, message.app_message_id)

(``send`` returns every message a send became: one, or one unicast per destination with
mfss and cykas, whose first stands for the application-level message.) Applying one's
own operation through a copy sent to oneself is not enough: mfss delivers that copy in
its output-buffer order, possibly after a message that depends on the operation.
Replicas that delivered the same operations hold the same value, whatever the order of
concurrent ones.

Which modules carry these types: those that order a multicast as one event (``vector``,
``matrix``, ``matrix-delta``, ``ks``). ``mfss`` and ``cykas`` send a multicast as one unicast
per destination, each its own send event, and order the copies, not the application
message: a member can deliver an operation before its copy of one the operation
depends on, and replicas diverge (the tests show it). :func:`unsupported_reason` says
so for a module; ``none`` and ``fifo`` give no causal order at all.

:class:`EditorReplica` is what every editor of the text does on top of the type (own
edits, deliveries, cursors, collection, snapshots): the terminal editor, the web
gateway's mirrors and, in JavaScript, the browser tab keep one.
"""

from groupcomm.replicated.editor import EditorReplica
from groupcomm.replicated.stability import Stability
from groupcomm.replicated.support import supported_modules, unsupported_reason
from groupcomm.replicated.types import AddWinsSet, Counter, MultiValueRegister, TextSequence

__all__ = ["AddWinsSet", "Counter", "EditorReplica", "MultiValueRegister", "Stability",
           "TextSequence", "supported_modules", "unsupported_reason"]
