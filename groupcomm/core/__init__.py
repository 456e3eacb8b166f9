"""The message and filter model, with no sockets and no threads of its own.

Messages (:mod:`~groupcomm.core.messages`), filters, pipelines and selectors
(:mod:`~groupcomm.core.filtering`), the causality-module base classes
(:mod:`~groupcomm.core.causality`), the transport-independent protocol node that runs
one member's pipelines (:mod:`~groupcomm.core.node`), the registry of installed modules
(the pluggy plugin manager, :mod:`~groupcomm.core.registry`, with the hooks plugins
implement, :mod:`~groupcomm.core.hookspecs`) and the start-up choice among them
(:mod:`~groupcomm.core.selection`), trace sinks (:mod:`~groupcomm.core.tracing`) and the
causal-order oracle the tests judge by (:mod:`~groupcomm.core.oracle`). Every host —
the ZeroMQ transport, the simulator, the model checker, the in-process network — builds
on this package; it imports none of them.
"""
