"""Real processes over ZeroMQ: the communicator, its sockets and poll thread, the session
server, keys and injected delays (docs/architecture.md, the package table)."""
