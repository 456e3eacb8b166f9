"""The chat screen's ordering of a send's line against deliveries on the I/O thread."""

from __future__ import annotations

import io
import threading

from groupcomm.apps.im import ChatScreen, Private
from groupcomm.core.messages import ReceivedMessage, SentMessage


def test_a_note_to_oneself_delivered_during_the_send_is_shown_after_its_line() -> None:
    out = io.StringIO()
    screen = ChatScreen("alice", out)
    note = Private("remember the milk")
    vc = (("alice", 1),)
    sent = SentMessage(application_name="im", session_name="office", user_message=note,
                       message_id="alice#1", sender="alice", vc=vc,
                       destinations=("alice",))
    received = ReceivedMessage(application_name="im", session_name="office",
                               user_message=note, message_id="alice#1", sender="alice",
                               vc=vc, receiver="alice")
    io_thread = threading.Thread(target=screen.message, args=(received,))

    def send() -> list[SentMessage]:
        # the I/O thread delivers the note while the application is still in the send
        io_thread.start()
        io_thread.join(timeout=0.3)
        return [sent]

    screen.send(send)
    io_thread.join(timeout=10)
    assert not io_thread.is_alive()
    assert out.getvalue().splitlines() == [
        "#1 [you -> yourself] remember the milk",
        "#2 [alice -> you] remember the milk",
    ]
