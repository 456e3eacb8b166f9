"""The gateway without a browser: a WebSocket client plays the tab (login, refusals,
bad messages, exact tags, reconnecting), and the users file."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from groupcomm.core.member_ids import display_name
from groupcomm.core.messages import Tag
from groupcomm.replicated import EditorReplica, TextSequence
from groupcomm.tools.procs import ProcessGroup
from groupcomm.web.auth import Users
from groupcomm.web.cli import main as web_main
from groupcomm.web.requests import LIMITS, MAX_MESSAGE, MAX_TABS, MAX_TEXT
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess

DEADLINE = 20.0


@pytest.fixture(scope="module")
def gateway(session_group: ProcessGroup, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path_factory.mktemp("gateway"),
                             users=("ann", "ben", "cat", "dan", "eve"))
    try:
        yield process
    finally:
        process.stop()


class Tab:
    """A WebSocket client speaking the page's protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []

    async def next(self, predicate=lambda e: True, what: str = "event") -> dict[str, Any]:
        """The first event (kept or arriving) that matches ``predicate``; the others
        are kept, in order, for later calls."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while True:
            for k, event in enumerate(self.events):
                if predicate(event):
                    return self.events.pop(k)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no {what} within {DEADLINE:g} s; got {self.events}")
            message = await self.ws.receive(timeout=remaining)
            if message.type != aiohttp.WSMsgType.TEXT:
                raise AssertionError(f"connection ended ({message.type}) waiting for {what}")
            data = json.loads(message.data)
            self.events.extend(data if isinstance(data, list) else [data])


async def connect(session: aiohttp.ClientSession, gateway: GatewayProcess, kind: str,
                  user: str, token: str | None = None, origin: str | None = None) -> Tab:
    ws = await session.ws_connect(f"ws://{gateway.host_port}/ws/{kind}",
                                  origin=origin or gateway.url)
    await ws.send_json({"type": "hello", "user": user,
                        "token": token if token is not None else gateway.tokens[user]})
    return Tab(ws)


async def two_tabs(session: aiohttp.ClientSession, gateway: GatewayProcess, kind: str,
                   first: str, second: str) -> tuple[Tab, dict, Tab]:
    """``first``'s tab, its welcome and ``second``'s tab, once ``first`` saw ``second``
    join."""
    one = await connect(session, gateway, kind, first)
    welcome = await one.next(lambda e: e["type"] == "welcome")
    two = await connect(session, gateway, kind, second)
    await two.next(lambda e: e["type"] == "welcome")
    await one.next(lambda e: e["type"] == "joined" and e["member"].startswith(second))
    return one, welcome, two


def run(coroutine) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def test_a_send_racing_a_delivery_is_tagged_concurrent_with_it(gateway: GatewayProcess) -> None:
    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann = await connect(session, gateway, "im", "ann")
            await ann.next(lambda e: e["type"] == "welcome", "ann's welcome")
            ben = await connect(session, gateway, "im", "ben")
            await ben.next(lambda e: e["type"] == "welcome", "ben's welcome")
            await ann.next(lambda e: e["type"] == "joined" and e["member"] == "ben")
            await ben.ws.send_json({"type": "say", "applied": 0, "text": "question?",
                                    "to": None})
            question = await ben.next(lambda e: e["type"] == "sent", "ben's sent")
            # the delivery is on ann's WebSocket, not applied: a send now races it
            delivered = await ann.next(lambda e: e["type"] == "deliver", "the question")
            assert delivered["id"] == question["id"]
            await ann.ws.send_json({"type": "say", "applied": 0, "text": "unrelated",
                                    "to": None})
            racing = await ann.next(lambda e: e["type"] == "sent", "ann's racing send")
            assert Tag(racing["vc"]).concurrent_with(Tag(question["vc"]))
            # once the tab says it applied the question, its send is after it
            await ann.ws.send_json({"type": "say", "applied": delivered["n"],
                                    "text": "answer", "to": None})
            answer = await ann.next(lambda e: e["type"] == "sent", "ann's answer")
            assert Tag(question["vc"]).happened_before(Tag(answer["vc"]))
            # ben sees both with the same tags
            seen = [await ben.next(lambda e: e["type"] == "deliver") for _ in range(2)]
            assert [(e["text"], e["vc"]) for e in seen] == [
                ("unrelated", racing["vc"]), ("answer", answer["vc"])]
            await ann.ws.close()
            await ben.ws.close()

    run(scenario())


def test_wrong_credentials_and_other_origins_are_refused(gateway: GatewayProcess) -> None:
    before = gateway.stats()["counters"]

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            for user, token in (("ann", "not-the-token"), ("nobody", "x"),
                                ("ann", gateway.tokens["ben"])):
                tab = await connect(session, gateway, "im", user, token)
                error = await tab.next(what="refusal")
                assert error == {"type": "error", "ref": None, "error":
                                 "wrong user name or token (ask for a new login link)"}
                closed = await tab.ws.receive(timeout=DEADLINE)
                assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await connect(session, gateway, "im", "ann", origin="http://evil.example")
            assert refused.value.status == 403

    run(scenario())
    after = gateway.stats()["counters"]
    assert after.get("login_failed", 0) - before.get("login_failed", 0) == 3
    assert after.get("refused_origin", 0) - before.get("refused_origin", 0) == 1
    assert not any(tab.endswith("/nobody") for tab in gateway.stats()["tabs"])
    assert gateway.stats()["shared_thread"]  # every tab's member on the host's one thread


def test_bad_messages_get_a_reason_and_change_nothing(gateway: GatewayProcess) -> None:
    before = gateway.stats()["counters"]

    async def scenario() -> list[str]:
        async with aiohttp.ClientSession() as session:
            cat = await connect(session, gateway, "im", "cat")
            await cat.next(lambda e: e["type"] == "welcome")
            dan = await connect(session, gateway, "im", "dan")
            await dan.next(lambda e: e["type"] == "welcome")
            await cat.next(lambda e: e["type"] == "joined" and e["member"] == "dan")
            reasons = []
            for bad in ("x" * (MAX_MESSAGE + 1), "{not json", "[1, 2]",
                        json.dumps({"type": "say", "applied": -1, "text": "x"}),
                        json.dumps({"type": "say", "applied": 0, "text": ""}),
                        json.dumps({"type": "say", "applied": 0, "text": "x", "to": "dan",
                                    "line": "no spaces"}),
                        json.dumps({"type": "say", "applied": 0, "text": "x", "said": "noon"}),
                        json.dumps({"type": "edit", "applied": 0}),
                        json.dumps({"type": "applied", "n": 99})):
                await cat.ws.send_str(bad)
                reasons.append((await cat.next(lambda e: e["type"] == "error"))["error"])
            # the connection and the member are still there, and nothing was sent
            await cat.ws.send_json({"type": "say", "applied": 0, "text": "still here",
                                    "to": None, "said": 1_700_000_000.5})
            got = await dan.next(lambda e: e["type"] == "deliver")
            assert got["text"] == "still here" and got["n"] == 1
            # the time the tab said it, and the identity every viewer gives the line
            assert (got["said"], got["ident"]) == (1_700_000_000.5, "cat·1")
            # a private line carries the tab's id for it to its receiver
            await cat.ws.send_json({"type": "say", "applied": 0, "text": "psst", "to": "dan",
                                    "line": "l1-abc_9"})
            got = await dan.next(lambda e: e["type"] == "deliver")
            assert (got["text"], got["private"], got["line"]) == ("psst", True, "l1-abc_9")
            await cat.ws.close()
            await dan.ws.close()
            return reasons

    reasons = run(scenario())
    assert reasons == [
        f"message of {MAX_MESSAGE + 1:,} bytes; at most {MAX_MESSAGE:,}",
        "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "expected a JSON object, got list",
        "'applied' must be a count (an integer >= 0), not -1",
        "text must be a non-empty string, not ''",
        "'line' must be up to 64 letters, digits, '-' or '_', not 'no spaces'",
        "'said' must be seconds since the epoch, not 'noon'",
        "'edit' is not taken on the im page",
        "applied 99, but only 0 deliveries were sent to this tab",
    ]
    after = gateway.stats()["counters"]
    assert after.get("oversized", 0) - before.get("oversized", 0) == 1
    assert after.get("malformed", 0) - before.get("malformed", 0) == 7
    assert after.get("refused", 0) - before.get("refused", 0) == 1


def test_a_dropped_tab_comes_back_as_its_next_incarnation_with_the_conversation(
        gateway: GatewayProcess) -> None:
    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            eve, first, ben = await two_tabs(session, gateway, "im", "eve", "ben")
            await eve.ws.send_json({"type": "say", "applied": 0, "text": "before the drop",
                                    "to": None})
            await eve.next(lambda e: e["type"] == "sent")
            got = await ben.next(lambda e: e["type"] == "deliver")
            await ben.ws.send_json({"type": "applied", "n": got["n"]})
            await eve.ws.close()  # the connection drops
            await ben.next(lambda e: e["type"] == "left" and e["member"] == first["member"])
            back = await connect(session, gateway, "im", "eve")
            welcome = await back.next(lambda e: e["type"] == "welcome", "the new welcome")
            assert welcome["member"] == f"eve~{2 if first['member'] == 'eve' else 3}"
            assert [entry[1] for entry in welcome["state"]["history"]][-1:] == [
                "before the drop"]
            await back.ws.close()
            await ben.ws.close()

    run(scenario())


def test_a_newcomer_gets_what_a_tab_applied_once_it_says_so(gateway: GatewayProcess) -> None:
    """A tab's member answers a newcomer's state request with what the tab applied; a
    message handed to the tab before the join is in the snapshot once the tab says it
    applied it (it was not sent to the newcomer: without that it would be lost to it)."""
    wait_until(lambda: not gateway.stats()["tabs"], 20, "earlier tabs to leave")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann, first, ben = await two_tabs(session, gateway, "im", "ann", "ben")
            await ben.ws.send_json({"type": "say", "applied": 0, "text": "to ann only",
                                    "to": None})
            handed = await ann.next(lambda e: e["type"] == "deliver")
            cat = await connect(session, gateway, "im", "cat")  # ann has not applied it yet
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while not (await loop.run_in_executor(None, gateway.stats))["snapshots_waiting"]:
                assert loop.time() < deadline, "no state request waited for ann's tab"
                await asyncio.sleep(0.02)
            await ann.ws.send_json({"type": "applied", "n": handed["n"]})
            welcome = await cat.next(lambda e: e["type"] == "welcome")
            assert welcome["members_at_join"][0] == first["member"]  # ann answered
            assert [entry[1] for entry in welcome["state"]["history"]] == ["to ann only"]
            for tab in (ann, ben, cat):
                await tab.ws.close()

    run(scenario())


def test_an_edit_tab_names_its_unconfirmed_characters_and_can_start_again(
        gateway: GatewayProcess) -> None:
    """The editor page's protocol: an edit answered with its id and tag (``sent``), an
    edit naming a provisional id translated, one naming a character that is not there
    or too long refused (naming it) with nothing sent, and the tab's member's state on ``resync`` in the one
    snapshot format."""
    wait_until(lambda: not gateway.stats()["tabs"], 20, "earlier tabs to leave")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann, first, ben = await two_tabs(session, gateway, "edit", "ann", "ben")
            me = first["member"]
            assert TextSequence.from_state(first["state"]["items"]).value == ""
            await ann.ws.send_json({"type": "edit", "applied": 0, "local": "~L1",
                                    "op": ["insert", None, "hi"]})
            sent = await ann.next(lambda e: e["type"] == "sent", "the first edit's id")
            assert sent["local"] == "~L1" and sent["id"].startswith(f"{me}#")
            await ann.ws.send_json({"type": "edit", "applied": 0, "local": "~L2",
                                    "op": ["insert", f"{me}#~L1+1", "!"]})
            second = await ann.next(lambda e: e["type"] == "sent" and e["local"] == "~L2")
            await ann.ws.send_json({"type": "edit", "applied": 0, "local": "~L3",
                                    "op": ["insert", "nobody#1", "?"]})
            refused = await ann.next(lambda e: e["type"] == "error", "the refusal")
            assert refused["ref"] == "~L3" and "'nobody#1'" in refused["error"]
            # an insert over the limits the welcome states: refused as it is read, and
            # the refusal names the edit (the tab takes it back)
            assert first["limits"] == LIMITS
            await ann.ws.send_json({"type": "edit", "applied": 0, "local": "~L4",
                                    "op": ["insert", None, "x" * (MAX_TEXT + 1)]})
            too_long = await ann.next(lambda e: e["type"] == "error", "the second refusal")
            assert too_long == {"type": "error", "ref": "~L4", "error": "inserted text has "
                                f"{MAX_TEXT + 1:,} characters; at most {MAX_TEXT:,}"}
            await ann.ws.send_json({"type": "resync"})
            state = await ann.next(lambda e: e["type"] == "state", "the state")
            assert TextSequence.from_state(state["state"]["items"]).value == "hi!"
            assert state["state"]["cursors"][me] == second["id"]  # after the "!"
            delivered = [await ben.next(lambda e: e["type"] == "deliver") for _ in range(2)]
            assert [e["op"] for e in delivered] == [["insert", None, "hi"],
                                                    ["insert", f"{sent['id']}+1", "!"]]
            await ann.ws.close()
            await ben.ws.close()

    run(scenario())


def test_a_bad_edit_is_refused_to_its_sender_and_reaches_no_one(
        gateway: GatewayProcess) -> None:
    """An edit the gateway's mirror of the tab cannot apply, or that names what the tab
    had not applied or had seen deleted, is refused to that tab with the reason and
    counted; the other tab gets nothing of it, and both end with the same text."""
    wait_until(lambda: not gateway.stats()["tabs"], 20, "earlier tabs to leave")
    before = gateway.stats()["counters"]

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann, first, ben = await two_tabs(session, gateway, "edit", "ann", "ben")
            await ben.ws.send_json({"type": "edit", "applied": 0, "local": "~L1",
                                    "op": ["insert", None, "hey"]})
            sent = await ben.next(lambda e: e["type"] == "sent")
            hey = sent["id"]
            handed = await ann.next(lambda e: e["type"] == "deliver", "ben's insert")
            n = handed["n"]
            refusals: list[str] = []

            async def refused(applied: int, op: list) -> None:
                await ann.ws.send_json({"type": "edit", "applied": applied, "local": "~L9",
                                        "op": op})
                refusal = await ann.next(lambda e: e["type"] == "error", f"refusal of {op}")
                # (a malformed edit too: the tab takes back the edit the refusal names)
                assert refusal["ref"] == "~L9"
                refusals.append(refusal["error"])

            await refused(0, ["delete", hey])  # handed to the tab, not applied by it
            await refused(n, ["delete", "nobody#1"])
            await refused(n, ["delete", [hey, hey]])
            await refused(n, ["insert", f"{first['member']}#~L7", "x"])
            await ann.ws.send_json({"type": "edit", "applied": n, "local": "~L1",
                                    "op": ["delete", f"{hey}+1"]})
            await ann.next(lambda e: e["type"] == "sent", "the good delete")
            await refused(n, ["delete", f"{hey}+1"])  # seen deleted: invisible to the tab
            await ann.ws.send_json({"type": "edit", "applied": n, "local": "~L2",
                                    "op": ["insert", f"{hey}+2", "!"]})
            await ann.next(lambda e: e["type"] == "sent", "the good insert")
            # ben gets the two good edits and nothing else, and a replica applies both
            replica = EditorReplica("observer", None)
            replica.delivered(hey.partition("#")[0], ("insert", None, "hey"),
                              Tag(sent["vc"]), hey)
            deliveries = [await ben.next(lambda e: e["type"] == "deliver") for _ in range(2)]
            for event in deliveries:
                replica.delivered(event["sender"], tuple(event["op"]), Tag(event["vc"]),
                                  event["id"])
            assert [e["op"][0] for e in deliveries] == ["delete", "insert"]
            assert replica.failures == 0 and replica.text.value == "hy!"
            texts = []
            for tab in (ann, ben):
                await tab.ws.send_json({"type": "resync"})
                state = await tab.next(lambda e: e["type"] == "state", "the state")
                texts.append(TextSequence.from_state(state["state"]["items"]).value)
            assert texts == ["hy!", "hy!"]
            assert not [e for e in ben.events if e["type"] in ("deliver", "error")]
            assert refusals == [
                f"edit refused, nothing sent: {reason}" if reason else f"a delete names "
                f"{hey!r} twice" for reason in (
                    f"the operation names {hey!r}, whose insert the sender had not applied "
                    "when it made the operation",
                    f"the operation names 'nobody#1', which is not in {first['member']}'s "
                    "text",
                    None,
                    f"unknown provisional id '{first['member']}#~L7'",
                    f"the delete names '{hey}+1', which the sender had already seen "
                    "deleted")]
            for tab in (ann, ben):
                await tab.ws.close()

    run(scenario())
    after = gateway.stats()["counters"]
    assert after.get("bad_edit", 0) - before.get("bad_edit", 0) == 4
    assert after.get("malformed", 0) - before.get("malformed", 0) == 1


def _users_cli(*args: str) -> str:
    """``groupcomm web user ...`` as a person runs it; its output."""
    done = subprocess.run([sys.executable, "-m", "groupcomm.web.cli", "user", *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.long  # about 12 s: a gateway of its own, and the periodic check's wait
def test_the_users_file_is_read_again_when_it_changes(
        session_group: ProcessGroup, tmp_path: Path) -> None:
    """A user added while the gateway runs logs in at once; a removed one cannot, and
    its open tab is closed; a malformed file keeps the users read before, said once."""
    gateway = GatewayProcess(session_group, tmp_path, session="users", users=("ann",))
    users = str(gateway.users_file)

    async def login(session: aiohttp.ClientSession, user: str, token: str) -> dict:
        tab = await connect(session, gateway, "im", user, token)
        event = await tab.next(lambda e: e["type"] in ("welcome", "error"), "the answer")
        await tab.ws.close()
        return event

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            printed = _users_cli("add", "zoe", "--users", users, "--url", gateway.url)
            zoe = printed.rpartition("token=")[2].strip()
            assert (await login(session, "zoe", zoe))["type"] == "welcome"
            ann = await connect(session, gateway, "im", "ann")
            await ann.next(lambda e: e["type"] == "welcome")
            _users_cli("remove", "ann", "--users", users)
            # the periodic check closes the open tab; a new login is refused
            fatal = await ann.next(lambda e: e["type"] == "fatal", "ann's tab closed")
            assert fatal["error"] == "ann was removed from this gateway's users"
            refused = await login(session, "ann", gateway.tokens["ann"])
            assert refused["error"] == "wrong user name or token (ask for a new login link)"
            gateway.users_file.write_text('{"users": {"zoe": ')
            for _ in range(2):  # the old users stay; the bad version is reported once
                assert (await login(session, "zoe", zoe))["type"] == "welcome"

    run(scenario())
    try:
        counters = gateway.stats()["counters"]
        assert counters["users_reload_failed"] == 1
        assert counters["tabs_of_removed_users"] == 1
        assert counters["users_reloaded"] >= 2
        warnings = [line for line in gateway.stderr_lines if "users file" in line]
        assert len(warnings) == 2, warnings
        assert warnings[0].endswith("closing ann's im tab: no longer in the users file")
        assert warnings[1].endswith(
            f"cannot read the users file {users}: Expecting value: line 1 column 19 (char "
            "18); keeping the 1 user(s) read before")
    finally:
        gateway.stop()


def test_user_add_prints_login_links_and_keeps_only_a_hash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    users = tmp_path / "users.json"
    assert web_main(["user", "add", "zoe", "--users", str(users), "--url",
                     "http://127.0.0.1:8080"]) == 0
    printed = capsys.readouterr().out
    link = next(line.split()[1] for line in printed.splitlines() if "editor:" in line)
    assert link.startswith("http://127.0.0.1:8080/edit#user=zoe&token=")
    token = link.rpartition("token=")[2]
    assert token not in users.read_text()
    assert oct(users.stat().st_mode & 0o777) == "0o600"
    assert Users(users).verify("zoe", token)
    # one character changed (to one it is not: a token ends in "x" one time in 64)
    assert not Users(users).verify("zoe", token[:-1] + ("y" if token.endswith("x") else "x"))
    assert web_main(["user", "add", "no~pe", "--users", str(users), "--url",
                     "http://h:1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "groupcomm web user add: user name 'no~pe': use 1 to 40 letters, digits, '_', "
        "'.' or '-'")
    assert web_main(["user", "remove", "ann", "--users", str(users)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"groupcomm web user remove: no user 'ann' in {users} (users: zoe)")
    assert web_main(["--session", "s", "--users", str(users), "--http", "nowhere"]) == 2
    assert capsys.readouterr().err.strip() == (
        "groupcomm web: --http takes HOST:PORT (port 0 to 65535), got 'nowhere'")


@pytest.mark.slow
def test_the_bench_measures_terminal_and_gateway_latency() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.web.cli", "bench", "--keys", "10", "--skip",
         "browser", "--skip", "peer", "--tabs-per-session", "2", "--max-tabs", "4",
         "--seconds", "2", "--json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["terminal_to_terminal"]["n"] == 10
    assert 0 < result["terminal_to_terminal"]["p50_ms"] <= result["terminal_to_terminal"]["p99_ms"]
    steps = result["capacity"]["steps"]
    assert [s["tabs"] for s in steps][:1] == [2] and all(s["n"] > 0 for s in steps)


def test_a_tab_that_only_reads_acknowledges_what_it_applied(gateway: GatewayProcess) -> None:
    """A tab that never edits: its member acknowledges its clock on the heartbeat, and
    that clock moves only when the tab says it applied the deliveries, so the writer's
    tab learns that the reader holds its edits once the reader applied them, not
    before (docs/replicated.md, "Members that never send")."""
    wait_until(lambda: not gateway.stats()["tabs"], 20, "earlier tabs to leave")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann, first, ben = await two_tabs(session, gateway, "edit", "ann", "ben")
            me = first["member"]
            await ann.ws.send_json({"type": "edit", "applied": 0, "local": "~L1",
                                    "op": ["insert", None, "hello"]})
            sent = await ann.next(lambda e: e["type"] == "sent", "the edit's id")
            mine = sent["vc"][me]
            delivered = await ben.next(lambda e: e["type"] == "deliver", "the edit")
            # handed to ben's tab, not applied there: nothing ben acknowledges covers it.
            # What does not happen is watched for over two heartbeats (0.5 s each): a
            # span, not an event to wait for
            await asyncio.sleep(1.2)
            early = [e for e in ann.events if e["type"] == "acknowledged"]
            assert all(e["vc"].get(me, 0) < mine for e in early), early
            await ben.ws.send_json({"type": "applied", "n": delivered["n"]})
            said = await ann.next(lambda e: e["type"] == "acknowledged"
                                  and e["member"].startswith("ben")
                                  and e["vc"].get(me, 0) >= mine, "ben's acknowledgement")
            assert set(said) == {"type", "member", "vc"}
            await ann.ws.close()
            await ben.ws.close()

    run(scenario())


def test_tabs_of_one_person_are_members_of_their_own_and_never_replace_each_other(
        gateway: GatewayProcess) -> None:
    """A second login of a person is ``name:2``; a tab asking for its number again
    gets it while it is free, and another when an open tab has it; beyond
    ``MAX_TABS`` a login is refused and counted."""
    wait_until(lambda: not gateway.stats()["tabs"], 20, "earlier tabs to leave")
    before = gateway.stats()["counters"]

    async def hello(session: aiohttp.ClientSession, tab: int | None) -> tuple[Tab, dict]:
        ws = await session.ws_connect(f"ws://{gateway.host_port}/ws/im", origin=gateway.url)
        await ws.send_json({"type": "hello", "user": "dan", "token": gateway.tokens["dan"],
                            "tab": tab})
        opened = Tab(ws)
        return opened, await opened.next(lambda e: e["type"] in ("welcome", "error"))

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            one, first = await hello(session, None)
            two, second = await hello(session, 1)  # a duplicated tab asks for 1
            # (earlier tests' dan was an incarnation before: dan~2, dan:2~2)
            assert (display_name(first["member"]), first["tab"]) == ("dan", 1)
            assert (display_name(second["member"]), second["tab"]) == ("dan:2", 2)
            await one.next(lambda e: e["type"] == "joined" and e["member"] == second["member"])
            await two.ws.close()  # a reload of tab 2: it asks for 2 and gets it back
            await one.next(lambda e: e["type"] == "left" and e["member"] == second["member"])
            two, again = await hello(session, 2)
            assert (display_name(again["member"]), again["tab"]) == ("dan:2", 2)
            assert again["member"] != second["member"]  # its next incarnation
            # tab 1 was never replaced: still there, no new member for it
            assert first["member"] in again["members"]
            more = [await hello(session, None) for _ in range(MAX_TABS - 2)]
            assert {display_name(w["member"]) for _, w in more} == {
                f"dan:{n}" for n in range(3, MAX_TABS + 1)}
            refused, error = await hello(session, None)
            assert error["error"] == f"dan already has {MAX_TABS} tabs on the im page (close one)"
            for tab in (one, two, refused, *(t for t, _ in more)):
                await tab.ws.close()

    run(scenario())
    after = gateway.stats()["counters"]
    assert after["logins"] - before.get("logins", 0) == 3 + MAX_TABS - 2
    assert after.get("too_many_tabs", 0) - before.get("too_many_tabs", 0) == 1
