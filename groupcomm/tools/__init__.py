"""Tools that measure and exercise the framework, not part of its API: benchmarks
(:mod:`~groupcomm.tools.bench`, :mod:`~groupcomm.tools.overhead`), the frame fuzzer
(:mod:`~groupcomm.tools.fuzz`), the deterministic in-process network
(:mod:`~groupcomm.tools.localnet`), and the real-process harness used by the tests, the
demo and the stress run (:mod:`~groupcomm.tools.procs` starts and reaps processes;
:mod:`~groupcomm.tools.peer` is the scripted client they run)."""
