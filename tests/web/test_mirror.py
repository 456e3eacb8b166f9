"""The gateway's mirror of a tab's text (``groupcomm.web.members.TextMirror``) counts
as stable only what the tab had applied: it takes deliveries before the tab does, and
an edit the tab makes meanwhile is concurrent with them."""

from __future__ import annotations

from groupcomm.core.messages import Tag
from groupcomm.replicated import EditorReplica
from groupcomm.web.members import TextMirror


def test_an_insert_the_tab_has_not_applied_is_not_stable_in_its_mirror() -> None:
    mirror = TextMirror("ann")
    mirror.joined("ann", ["an2", "ann"])
    # an2 types "b"; the gateway hands it to ann's tab, which has not applied it yet
    mirror.delivered("an2", ("insert", None, "b"), Tag({"an2": 1}), "an2#1")
    assert not mirror.stability.is_stable(Tag({"an2": 1}))
    # meanwhile ann's tab typed "a" at the start, concurrent with an2's "b"
    mirror.sent(("insert", None, "a"), "ann#1", Tag({"ann": 1}))
    # the order every other replica gives the two concurrent inserts
    other = EditorReplica("obs", members=["an2", "ann", "obs"])
    other.delivered("ann", ("insert", None, "a"), Tag({"ann": 1}), "ann#1")
    other.delivered("an2", ("insert", None, "b"), Tag({"an2": 1}), "an2#1")
    assert mirror.text.value == other.text.value
    # once the tab says it applied the "b", it is stable (its own entry covers it)
    mirror.tab_applied({"an2": 1, "ann": 1})
    mirror.delivered("an2", ("insert", "an2#1", "c"), Tag({"an2": 2, "ann": 1}), "an2#2")
    assert mirror.stability.is_stable(Tag({"an2": 1}))
