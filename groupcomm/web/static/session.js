// The live session view: draws what the server derived from the trace records (members,
// clocks, held messages and their causes, the diagram's steps with their marks); it
// classifies nothing itself. Each step carries its member's state after it, so the
// view at slider position t takes each member's last step up to t.

const CREDENTIAL = "groupcomm-credential";
const SVG = "http://www.w3.org/2000/svg";
const DRAWN = new Set(["send", "deliver", "hold", "release", "leave", "join", "unhold"]);
// columns of the diagram drawn at most (the latest up to the slider)
const WINDOW = 240;
const COLUMN = 22, ROW = 46, LEFT = 90, TOP = 24;

function credential() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("user") && fragment.get("token")) {
    const found = { user: fragment.get("user"), token: fragment.get("token") };
    sessionStorage.setItem(CREDENTIAL, JSON.stringify(found));
    history.replaceState(null, "", location.pathname + location.search);
    return found;
  }
  const stored = sessionStorage.getItem(CREDENTIAL);
  return stored ? JSON.parse(stored) : {};
}

const view = new URLSearchParams(location.search).get("view") || "";
const steps = [];       // in index order
// the most steps a page keeps (an open page follows a busy session for hours)
const KEPT = 20000;
let dropped = 0;
let base = {};          // each member's state before the first kept step
let live = true;
const slider = document.getElementById("slider");
const status = document.getElementById("status");

function connect() {
  const who = credential();
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/session/ws`);
  ws.onopen = () => ws.send(JSON.stringify({ type: "hello", view, user: who.user, token: who.token }));
  ws.onmessage = (e) => {
    const message = JSON.parse(e.data);
    // a refusal (a wrong credential, no such view) stays on screen: no reconnection
    if (message.type === "error") { status.textContent = message.error; ws.refused = true; return; }
    if (message.type === "snapshot") {
      steps.length = 0;
      dropped = message.dropped;
      base = message.base || {};
      document.getElementById("title").textContent = message.title || "";
      showViews(message.views, message.view);
      add(message.steps);
      status.textContent = `live: ${message.view === "." ? "trace directory" : message.view}`;
      document.body.dataset.view = message.view;
    } else if (message.type === "steps") {
      add(message.steps);
    } else if (message.type === "views") {
      showViews(message.views, document.body.dataset.view);
    }
  };
  ws.onclose = () => {
    if (ws.refused) return;
    status.textContent = "disconnected; reconnecting…";
    setTimeout(connect, 1000);
  };
}

function showViews(names, current) {
  const select = document.getElementById("views");
  select.replaceChildren(...names.map((name) => {
    const option = document.createElement("option");
    option.value = name;
    option.textContent = name === "." ? "(top)" : name;
    option.selected = name === current;
    return option;
  }));
  select.onchange = () => { location.search = `?view=${encodeURIComponent(select.value)}`; };
}

function add(more) {
  for (const step of more) steps.push(step);
  if (steps.length > KEPT) {
    for (const step of steps.splice(0, steps.length - KEPT)) if (step.state) base[step.process] = step.state;
    dropped = steps[0].i;
  }
  const last = steps.length ? steps[steps.length - 1].i : 0;
  slider.min = String(steps.length ? steps[0].i : 0);
  slider.max = String(last);
  if (live) slider.value = String(last);
  scheduleRender();
}

// a busy session (an editor's keystrokes) sends steps faster than a diagram is worth
// drawing: draw at most every 50 ms (a timer, not an animation frame, which a
// background tab never gets: its view is current when it is looked at)
let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  setTimeout(() => { renderPending = false; render(); }, 50);
}

slider.addEventListener("input", () => { live = Number(slider.value) >= Number(slider.max); render(); });
document.getElementById("live").addEventListener("click", () => { live = true; slider.value = slider.max; render(); });

function upTo(t) {
  // steps are in index order: the last one at or before t
  let lo = 0, hi = steps.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (steps[mid].i <= t) lo = mid + 1; else hi = mid; }
  return steps.slice(0, lo);
}

function render() {
  const t = Number(slider.value);
  const shown = upTo(t);
  const at = shown.length ? shown[shown.length - 1] : null;
  const since = at && steps.length ? ` at +${(at.ts - steps[0].ts).toFixed(3)} s` : "";
  document.getElementById("at").textContent = at
    ? `step ${at.i} of ${slider.max}${since}${live ? " (live)" : ""}${dropped ? `; ${dropped} earlier steps not kept` : ""}`
    : "no steps yet";
  document.body.dataset.at = String(at ? at.i : -1);
  const states = new Map(Object.entries(base));
  for (const step of shown) if (step.state) states.set(step.process, step.state);
  renderMembers(states);
  renderDiagram(shown, [...states.keys()].sort(), states);
}

function clockText(clock) {
  const entries = Object.entries(clock || {}).filter(([, v]) => v).sort(([a], [b]) => a.localeCompare(b));
  return `[${entries.map(([k, v]) => `${k}:${v}`).join(", ")}]`;
}

function renderMembers(states) {
  const body = document.querySelector("#members tbody");
  body.replaceChildren(...[...states.keys()].sort().map((name) => {
    const state = states.get(name);
    const row = document.createElement("tr");
    row.dataset.member = name;
    if (!state.present) row.className = "gone";
    const who = document.createElement("td");
    who.textContent = `${name}${state.present ? "" : " (left)"}`;
    const clock = document.createElement("td");
    clock.className = "clock";
    clock.textContent = clockText(state.clock);
    clock.title = `application vector clock (${state.protocol || "no module"})`;
    if (state.sent_matrix && Object.keys(state.sent_matrix).length) clock.append(matrixTable(state.sent_matrix));
    const held = document.createElement("td");
    if (state.held.length) {
      const list = document.createElement("ul");
      list.className = "held";
      for (const h of state.held) {
        const item = document.createElement("li");
        item.className = "held";
        item.dataset.msg = h.msg;
        item.dataset.causes = h.causes.map((c) => c.msg || c.sender).join(" ");
        item.textContent = h.text;
        list.append(item);
      }
      held.append(list);
    } else {
      held.textContent = "—";
    }
    row.append(who, clock, held);
    return row;
  }));
}

// the messages each member sent to each other one, as this member knows of them (the
// SENT matrix of the matrix modules)
function matrixTable(matrix) {
  const rows = Object.keys(matrix).sort();
  const columns = [...new Set(rows.flatMap((r) => Object.keys(matrix[r])))].sort();
  const table = document.createElement("table");
  table.className = "matrix";
  table.title = "messages sent (row) to (column), as this member knows of them";
  const head = table.createTHead().insertRow();
  head.append(Object.assign(document.createElement("th"), { textContent: "sent→" }));
  for (const c of columns) head.append(Object.assign(document.createElement("th"), { textContent: c }));
  const body = table.createTBody();
  for (const r of rows) {
    const row = body.insertRow();
    row.append(Object.assign(document.createElement("th"), { textContent: r }));
    for (const c of columns) row.insertCell().textContent = String(matrix[r][c] || 0);
  }
  return table;
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderDiagram(shown, members, states) {
  const marks = new Map(); // step index -> extra marks from mark steps
  for (const step of shown) {
    if (step.kind === "mark") (marks.get(step.target) || marks.set(step.target, []).get(step.target)).push(step.mark);
  }
  let drawn = shown.filter((s) => DRAWN.has(s.kind));
  drawn = drawn.slice(Math.max(0, drawn.length - WINDOW));
  // columns in trace time: files read by groupcomm watch arrive in any order
  drawn.sort((a, b) => a.ts - b.ts || a.i - b.i);
  for (const s of drawn) if (!members.includes(s.process)) members.push(s.process);
  // senders whose trace is not here (a gateway's terminal members): a line of their
  // own, without sends on it
  const untraced = new Set();
  for (const s of drawn) {
    if (s.kind === "deliver" && !members.includes(s.sender)) { members.push(s.sender); untraced.add(s.sender); }
  }
  const row = new Map(members.map((m, k) => [m, TOP + k * ROW]));
  const column = new Map(drawn.map((s, k) => [s.i, LEFT + 20 + k * COLUMN]));
  const width = LEFT + 60 + drawn.length * COLUMN;
  const height = TOP + members.length * ROW;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
  svg.append(el("defs", {}));
  for (const [color, id] of [["#1f77b4", "normal"], ["#d62728", "violation"], ["#ff7f0e", "early"], ["#9467bd", "released"], ["#e0a100", "held"]]) {
    const marker = el("marker", { id: `head-${id}`, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" });
    marker.append(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: color }));
    svg.firstChild.append(marker);
  }
  for (const m of members) {
    const y = row.get(m);
    svg.append(el("line", { x1: LEFT, y1: y, x2: width - 10, y2: y, stroke: "#bbb" }));
    svg.append(el("text", { x: 6, y: y + 4, class: "member" }, m));
    if (untraced.has(m)) svg.append(el("text", { x: 6, y: y + 16, fill: "#888" }, "(no trace here)"));
  }
  const sends = new Map();
  const holds = new Map(); // process/msg -> x of the hold
  for (const s of drawn) {
    const x = column.get(s.i), y = row.get(s.process);
    if (s.kind === "send") {
      sends.set(s.msg, s);
      const dot = el("circle", { cx: x, cy: y, r: 3, fill: "#000", class: "send", "data-msg": s.msg });
      dot.append(el("title", {}, `${s.msg} sent by ${s.process} to ${(s.dests || []).join(", ")}, clock ${clockText(s.vc)}`));
      svg.append(dot);
      svg.append(el("text", { x: x + 2, y: y - 6 }, s.msg));
    } else if (s.kind === "hold") {
      holds.set(`${s.process}\u0000${s.msg}`, x);
      svg.append(el("circle", { cx: x, cy: y, r: 4, fill: "#e0a100", class: "hold", "data-msg": s.msg }));
    } else if (s.kind === "release") {
      const tick = el("g", { class: "release-mark" });
      tick.append(el("line", { x1: x, y1: y - 12, x2: x, y2: y + 12, stroke: "#9467bd", "stroke-width": 2 }));
      tick.append(el("text", { x: x + 3, y: y + 22, fill: "#9467bd" }, `release ${s.client}`));
      svg.append(tick);
    } else if (s.kind === "leave") {
      svg.append(el("text", { x: x - 4, y: y + 4, fill: "#999" }, "✕"));
    }
  }
  // held stretches: from the hold to the delivery (or to now while held)
  for (const s of drawn) {
    if (s.kind !== "deliver" && s.kind !== "unhold") continue;
    const key = `${s.process}\u0000${s.msg}`;
    if (!holds.has(key)) continue;
    const y = row.get(s.process);
    svg.append(el("line", { x1: holds.get(key), y1: y, x2: column.get(s.i), y2: y, stroke: "#e0a100", "stroke-width": 5, opacity: 0.6, class: "held-span" }));
    holds.delete(key);
  }
  for (const [key, x] of holds) {
    const y = row.get(key.split("\u0000")[0]);
    svg.append(el("line", { x1: x, y1: y, x2: width - 10, y2: y, stroke: "#e0a100", "stroke-width": 5, opacity: 0.6, class: "held-span open" }));
  }
  // what each message held now waits for: a dashed line from the hold back to the
  // missing message's send (when it is drawn)
  for (const [name, state] of states) {
    for (const h of state.held) {
      const x = holds.get(`${name}\u0000${h.msg}`);
      if (x === undefined) continue;
      const own = sends.get(h.msg);
      if (own && own.process !== name) { // arrived, not delivered: an arrow to the hold
        const arrived = el("line", { x1: column.get(own.i), y1: row.get(own.process), x2: x, y2: row.get(name), stroke: "#e0a100", "stroke-width": 1.4, "marker-end": "url(#head-held)", class: "arrival", "data-msg": h.msg, "data-to": name });
        arrived.append(el("title", {}, `${h.msg} arrived at ${name} and is held`));
        svg.append(arrived);
      }
      for (const cause of h.causes) {
        const send = cause.msg && sends.get(cause.msg);
        if (!send) continue;
        const line = el("line", { x1: x, y1: row.get(name), x2: column.get(send.i), y2: row.get(send.process), stroke: "#e0a100", "stroke-width": 1.2, "stroke-dasharray": "4 3", class: "waits-for", "data-msg": h.msg, "data-cause": cause.msg });
        line.append(el("title", {}, h.text));
        svg.append(line);
      }
    }
  }
  for (const s of drawn) {
    if (s.kind !== "deliver") continue;
    const send = sends.get(s.msg);
    const x = column.get(s.i), y = row.get(s.process);
    const all = [...(s.marks || []), ...(marks.get(s.i) || [])];
    const kind = all.includes("violation") ? "violation" : all.includes("early") ? "early"
      : all.includes("released") ? "released" : "normal";
    const color = { normal: "#1f77b4", violation: "#d62728", early: "#ff7f0e", released: "#9467bd" }[kind];
    if (send) {
      const arrow = el("line", {
        x1: column.get(send.i), y1: row.get(send.process), x2: x, y2: y, stroke: color,
        "stroke-width": kind === "violation" ? 2.5 : 1.4, "marker-end": `url(#head-${kind})`,
        class: "arrow", "data-msg": s.msg, "data-to": s.process, "data-marks": all.join(" "),
      });
      if (all.includes("duplicate")) arrow.setAttribute("stroke-dasharray", "2 3");
      else if (kind === "released") arrow.setAttribute("stroke-dasharray", "6 3");
      arrow.append(el("title", {}, `${s.msg} delivered at ${s.process}${all.length ? ` (${all.join(", ")})` : ""}`));
      svg.append(arrow);
    } else {
      // sent before the kept steps, or by a member whose trace is not here
      svg.append(el("circle", { cx: x, cy: y, r: 3, fill: "none", stroke: color, class: "arrow orphan", "data-msg": s.msg, "data-to": s.process, "data-marks": all.join(" ") }));
      svg.append(el("text", { x: x + 2, y: y + 14, fill: "#666" }, s.msg));
    }
    if (all.includes("concurrent")) {
      const mark = el("text", { x: x - 4, y: y - 7, fill: "#2ca02c", class: "concurrent", "data-msg": s.msg }, "∥");
      mark.append(el("title", {}, `${s.msg} is concurrent with ${s.concurrent_with}, delivered just before it at ${s.process}`));
      svg.append(mark);
    }
  }
  document.getElementById("diagram").replaceChildren(svg);
  document.getElementById("diagram").scrollLeft = live ? width : document.getElementById("diagram").scrollLeft;
}

connect();
