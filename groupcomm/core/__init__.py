"""The message and filter model, with no sockets and no threads of its own: messages,
filters and pipelines, the causality-module base classes, the protocol node, the
session protocol, the registry of installed modules, trace sinks and the causal-order
oracle (docs/architecture.md). Every host builds on this package; it imports none of
them.
"""
