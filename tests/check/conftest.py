"""Fixtures of the model checker's tests: throw-away modules registered for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def extra_modules() -> Iterator[None]:
    from groupcomm.core import registry
    from groupcomm.core.causality import ProtocolViolation
    from groupcomm.filters.mfss import MfssManager, MfssModule

    class ForgetfulManager(MfssManager):
        """MFSS that never sends the second message of its buffer: a liveness bug."""

        def try_send(self) -> None:
            if self.unacked is None and self.buffer and self.host.name == "p1":
                self.buffer.clear()
                return
            super().try_send()

    class ForgetfulModule(MfssModule):
        name = "test-forgetful"

        def create_manager(self, host):
            return ForgetfulManager(host)

    class RaisingManager(MfssManager):
        def on_ack(self, message) -> None:
            raise ProtocolViolation("test: acks are not welcome")

    class RaisingModule(MfssModule):
        name = "test-raising"

        def create_manager(self, host):
            return RaisingManager(host)

    registry.available_modules()
    for module in (ForgetfulModule, RaisingModule):
        registry.register_module(module, origin="tests")
    yield
    for module in (ForgetfulModule, RaisingModule):
        registry.unregister_module(module.name)
