"""Protocol logic with no I/O: inputs in, actions out (see docs/architecture.md).

:mod:`~groupcomm.protocol.registry` holds the session server's rules,
:mod:`~groupcomm.protocol.client` one member's.
"""
