// Replays recorded editing sessions (editor_sessions.py; JSON on stdin) into the
// browser's editor replica and prints, per session and mode, what it makes of them (one
// JSON line each). Mode "direct": each own send gets its recorded id and clock at once,
// as in the Python run. Mode "provisional": as in the tab, each own edit gets a
// provisional id (`${me}#~L${n}`) and the recorded clock, and is confirmed later with the
// recorded id and clock: at random points, and before any delivery whose clock shows it
// was seen (the gateway's answer comes before those).
import { readFileSync } from "node:fs";
import { EditorReplica, isPresence } from "../../groupcomm/web/static/editor.js";

let seed = 11;
function random() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}

function replay(session, provisional) {
  const me = session.me;
  let sends = [];
  let local = 0;
  const waiting = [];   // [provisional id, real id, clock], oldest first
  let mismatches = 0;
  let interleaved = 0;  // deliveries applied while own edits were unconfirmed
  const send = (payload) => {
    const [id, clock] = sends.shift();
    if (!provisional || isPresence(payload)) return { id, clock };
    local += 1;
    const temporary = `${me}#~L${local}`;
    waiting.push([temporary, id, clock]);
    return { id: temporary, clock, confirmed: false };
  };
  const confirmOldest = () => {
    const [temporary, id, clock] = waiting.shift();
    if (!replica.confirmed(temporary, id, clock)) mismatches += 1;
  };
  const replica = new EditorReplica(me, send, {
    members: session.members, coalesce: session.coalesce, collect: session.collect,
  });
  for (const step of session.steps) {
    const [kind, ...args] = step;
    if (provisional && waiting.length && random() < 0.3) confirmOldest();
    if (kind === "act") {
      const [method, params, recorded] = args;
      sends = recorded.map(([id, clock]) => [id, clock]);
      const name = { move_to: "moveTo" }[method] || method;
      replica[name](...params);
      if (sends.length) throw new Error(`${sends.length} recorded send(s) not made by ${method}`);
    } else if (kind === "deliver") {
      const [sender, payload, clock, id, superseded] = args;
      while (waiting.length && (clock[me] || 0) >= waiting[0][2][me]) confirmOldest();
      if (waiting.length) interleaved += 1;
      replica.delivered(sender, payload, clock, id, superseded);
    } else if (kind === "joined") {
      replica.memberJoined(args[0], args[1]);
    } else if (kind === "left") {
      replica.memberLeft(args[0]);
    } else if (kind === "install") {
      replica.install(args[0]);
    } else if (kind === "acknowledged") {
      replica.acknowledged(args[0], args[1]);
    } else {
      throw new Error(`unknown step ${kind}`);
    }
  }
  while (waiting.length) confirmOldest();
  const [value, at, others] = replica.view();
  const cursors = Object.fromEntries(Object.entries(replica.cursors).sort());
  return {
    value, at, others, cursor: replica.cursor, cursors,
    pending: replica.pending ? replica.pending.text : null,
    members: [...replica.members].sort(), applied: replica.applied,
    collected: replica.collected, failures: replica.failures, kept: replica.text.length,
    unconfirmed: replica.unconfirmed.length, mismatches, interleaved,
  };
}

const sessions = JSON.parse(readFileSync(0, "utf8"));
for (const session of sessions) {
  const modes = session.collect ? ["direct"] : ["direct", "provisional"];
  for (const mode of modes) {
    console.log(JSON.stringify({ seed: session.seed, mode, ...replay(session, mode === "provisional") }));
  }
}
