"""Extra filter layers that stack on any causality module: a reliable link
(:mod:`~groupcomm.layers.reliable`: retransmission, acknowledgement, de-duplication) and
fault injection (:mod:`~groupcomm.layers.faults`: drop and duplicate for testing)."""
