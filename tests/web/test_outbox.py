"""The editor tab's kept edits (``groupcomm/web/static/outbox.js``) under node: put back
on a received state, exactly once, at their places."""

from __future__ import annotations

import json

from tests.web.test_text_vectors import node_run


def test_the_editor_tabs_kept_edits_are_put_back_on_a_received_state_once() -> None:
    """Edits that reached the others before the connection dropped are not sent again,
    the rest are made again at their places, a delete of what someone else deleted is
    named, the cursor stays at its character (also after a second drop)."""
    assert json.loads(node_run("run_outbox.mjs")) == {"ok": True}
