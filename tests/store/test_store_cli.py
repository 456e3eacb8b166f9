"""``groupcomm store ls | export | drop`` on stores holding the built-in apps' formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groupcomm.cli.main import main
from groupcomm.core.messages import Tag
from groupcomm.replicated.editor import EditorReplica
from groupcomm.store.backend import StoredMessage, StoredSnapshot, open_store
from groupcomm.store.sqlite import SQLiteStore
from groupcomm.wire.payload import dump_payload


def _editor_ops(replica: EditorReplica, sent: list) -> None:
    clock = {"bob": 0}

    def send(payload):
        clock["bob"] += 1
        message_id = f"bob#{clock['bob']}"
        tag = Tag(tuple(clock.items()))
        sent.append((message_id, payload, tuple(clock.items())))
        return message_id, tag

    replica.send = send  # type: ignore[method-assign]


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    path = str(tmp_path / "s.db")
    store = open_store(path)
    # the IM: a history snapshot and two messages after it (one a private note)
    store.create_session("im", "office", "g-im", 1.0)
    fmt, data = dump_payload([("ann", "hello", "ann#1"), ("ben", "hi ann", "ben#1")])
    store.put_snapshot("im", "office", StoredSnapshot(fmt, data, ("ann#1", "ben#1"), (),
                                                      2.0, "ann"), [])
    store.append("im", "office", [StoredMessage("ann#2", "ann", *dump_payload("how are you"),
                                                vc=(("ann", 2),))])
    # the shared text: alice's snapshot and bob's edits after it
    store.create_session("edit", "paper", "g-ed", 1.0)
    alice = EditorReplica("alice", lambda op: ("alice#1", Tag((("alice", 1),))))
    alice.insert("Hello")
    alice.flush()
    snapshot = alice.snapshot()
    fmt, data = dump_payload(snapshot.state)
    store.put_snapshot("edit", "paper", StoredSnapshot(fmt, data, snapshot.reflects, (),
                                                       3.0, "alice"), [])
    bob = EditorReplica("bob")
    bob.install(snapshot.state)
    sent: list = []
    _editor_ops(bob, sent)
    bob.move_to(5)
    bob.insert(", world")
    bob.flush()
    store.append("edit", "paper", [StoredMessage(i, "bob", *dump_payload(p), vc=vc)
                                   for i, p, vc in sent])
    store.commit()
    store.close()
    return path


def test_ls_lists_every_session(store_path: str, capsys) -> None:
    assert main(["store", "ls", "--store", store_path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["APPLICATION/SESSION", "GENERATION", "SNAPSHOT", "AGE",
                              "MESSAGES", "STATE"]
    assert [line.split()[0] for line in out[1:]] == ["edit/paper", "im/office"]
    assert out[2].split()[1] == "g-im" and out[2].split()[-2:] == ["1", "whole"]
    assert main(["store", "ls", "--store", store_path, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["application"], s["generation"]) for s in listed] == [
        ("edit", "g-ed"), ("im", "g-im")]
    assert listed[0]["messages"] >= 1 and listed[1]["messages"] == 1
    assert [s["behind"] for s in listed] == [False, False]


def test_ls_says_which_sessions_a_store_failure_left_behind(store_path: str, capsys) -> None:
    store = SQLiteStore(store_path)
    store.set_behind("im", "office", True)
    store.commit()
    store.close()
    assert main(["store", "ls", "--store", store_path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in out[1:]] == ["whole", "behind"]
    assert main(["store", "ls", "--store", store_path, "--json"]) == 0
    assert [s["behind"] for s in json.loads(capsys.readouterr().out)] == [False, True]


def test_export_gives_the_chat_and_the_text(store_path: str, capsys) -> None:
    assert main(["store", "export", "office", "--store", store_path]) == 0
    assert capsys.readouterr().out == "[ann] hello\n[ben] hi ann\n[ann] how are you\n"
    assert main(["store", "export", "edit/paper", "--store", store_path]) == 0
    assert capsys.readouterr().out == "Hello, world\n"
    assert main(["store", "export", "paper", "--store", store_path, "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["generation"] == "g-ed" and exported["snapshot"]["source"] == "alice"
    assert {m["sender"] for m in exported["messages"]} == {"bob"}


def test_drop_removes_one_session(store_path: str, capsys) -> None:
    assert main(["store", "drop", "im/office", "--store", store_path]) == 0
    assert "dropped im/office" in capsys.readouterr().out
    assert main(["store", "ls", "--store", store_path, "--json"]) == 0
    assert [s["session"] for s in json.loads(capsys.readouterr().out)] == ["paper"]


def test_mistakes_are_one_line(store_path: str, tmp_path: Path, capsys) -> None:
    assert main(["store", "export", "nowhere", "--store", store_path]) == 2
    assert main(["store", "export", "--store", store_path]) == 2
    assert main(["store", "ls", "--store", str(tmp_path / "missing.db")]) == 2
    assert not (tmp_path / "missing.db").exists()
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3
    assert "no session 'nowhere'" in errors[0] and "name the session" in errors[1]
    assert "no such file" in errors[2]


def test_export_reads_the_chats_lines_with_their_times_and_counts(tmp_path: Path,
                                                                   capsys) -> None:
    from groupcomm.apps.im import Private
    from groupcomm.apps.im_lines import ChatLine

    path = str(tmp_path / "chat.db")
    store = open_store(path)
    store.create_session("im", "team", "g-1", 1.0)
    # the conversation as the chat hands it over: (member, text, id, said, count)
    fmt, data = dump_payload([("ann~2", "hello", "ann~2#1", 5.0, 1),
                              ("ben:2", "hi ann", "ben:2#1", 6.0, 1)])
    store.put_snapshot("im", "team", StoredSnapshot(fmt, data, ("ann~2#1", "ben:2#1"), (),
                                                    7.0, "ann~2"), [])
    store.append("im", "team", [
        StoredMessage("ann~2#2", "ann~2", *dump_payload(ChatLine("how are you", 8.0, 2)),
                      vc=(("ann~2", 2),)),
        StoredMessage("ann~2#3", "ann~2", *dump_payload(Private("psst", 9.0, 3)),
                      vc=(("ann~2", 3),)),
        StoredMessage("ben#1", "ben", *dump_payload("an older peer's line"),
                      vc=(("ben", 1),))])
    store.commit()
    store.close()
    assert main(["store", "export", "team", "--store", path]) == 0
    assert capsys.readouterr().out == ("[ann] hello\n[ben] hi ann\n[ann] how are you\n"
                                       "[ben] an older peer's line\n")
