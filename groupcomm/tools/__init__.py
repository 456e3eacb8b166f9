"""Tools that measure and exercise the framework, not part of its API: benchmarks, the
frame fuzzer, the deterministic in-process network, and the real-process harness
(:mod:`~groupcomm.tools.procs`, running :mod:`~groupcomm.tools.peer` clients)."""
