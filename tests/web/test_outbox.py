"""The editor tab's kept edits (``groupcomm/web/static/outbox.js``) under node: put back
on a received state, exactly once, at their places, judged already delivered by the
state's ``seen`` clock as the terminal's ``reapply.rebase`` judges them."""

from __future__ import annotations

import json

from groupcomm.core.messages import Tag
from groupcomm.replicated.reapply import OwnOperation, rebase
from groupcomm.replicated.text import TextSequence
from tests.web.test_text_vectors import node_run


def test_the_editor_tabs_kept_edits_are_put_back_on_a_received_state_once() -> None:
    """Edits that reached the others before the connection dropped are not sent again,
    the rest are made again at their places, a delete of what someone else deleted is
    named, the cursor stays at its character (also after a second drop)."""
    assert json.loads(node_run("run_outbox.mjs")) == {"ok": True}


def test_the_terminals_rule_judges_the_collected_insert_as_the_tab_does() -> None:
    """The case run_outbox.mjs checks for the tab, through reapply.py's ``rebase``: an
    own insert that reached the others, was deleted there and collected, is held by the
    state's ``seen`` clock; only the insert that never went out goes again, after the
    "i"; the delete that went out is held too."""
    old = TextSequence()
    old.effect(("insert", None, "Hi"), Tag({"tom": 1}), "tom#1", "tom")
    old.effect(("delete", "tom#1"), Tag({"tom": 1, "ann": 1}), "ann#1", "ann")
    old.effect(("insert", "tom#1+1", "x"), Tag({"tom": 1, "ann": 2}), "ann#2", "ann")
    old.effect(("insert", "ann#2", "y"), Tag({"tom": 1, "ann": 3}), "ann#3", "ann")
    received = TextSequence()
    received.effect(("insert", None, "Hi"), Tag({"tom": 1}), "tom#1", "tom")
    received.effect(("delete", "tom#1"), Tag({"tom": 1, "ann": 1}), "ann#1", "ann")
    own = [OwnOperation("ann#1", ("delete", "tom#1"), "ann", Tag({"tom": 1, "ann": 1})),
           OwnOperation("ann#2", ("insert", "tom#1+1", "x"), "ann", Tag({"tom": 1, "ann": 2})),
           OwnOperation("ann#3", ("insert", "ann#2", "y"), "ann", Tag({"tom": 1, "ann": 3}))]
    result = rebase(old, received, own, {"tom": 2, "ann": 2})
    assert result.held == ["ann#1", "ann#2"]
    assert result.ops == [("insert", "tom#1+1", "y")]


def test_the_editor_tab_keeps_confirmed_edits_until_they_are_stable() -> None:
    """An edit the gateway confirmed stays kept until the gateway says it is stable (a
    word that may come before the confirmation); put back on a received state, one
    the state's ``seen`` counts is not made again, one that never left the killed
    gateway is, at its place; a resync drops them; at most 500 are kept."""
    assert json.loads(node_run("run_outbox_kept.mjs")) == {"ok": True}
