"""Durable sessions: the session server's store (docs/storage.md)."""
