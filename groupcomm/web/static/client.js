// The tab's side of the gateway's WebSocket: log in with the credential of the login
// link, hand the page its state and its events in delivery order, count what the page
// has applied (the one count of deliveries on this side; the gateway acknowledges it to
// the member's communicator), and reconnect (as the member's next incarnation) when the
// connection drops.

const CREDENTIAL = "groupcomm-credential";

// The credential rides in the link's fragment (never sent to a server); kept in this
// tab's session storage so a reload or a reconnect keeps it, and taken out of the
// address bar.
export function credential() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("user") && fragment.get("token")) {
    const found = { user: fragment.get("user"), token: fragment.get("token") };
    sessionStorage.setItem(CREDENTIAL, JSON.stringify(found));
    history.replaceState(null, "", location.pathname);
    return found;
  }
  const stored = sessionStorage.getItem(CREDENTIAL);
  return stored ? JSON.parse(stored) : null;
}

// This tab's number among its person's tabs on a page (the gateway names tab 2's member
// ann:2), kept in the tab's session storage so a reload or a reconnect asks for the same
// one; the gateway gives another when an open tab has it (a duplicated tab).
function tabKey(kind, user) {
  return `groupcomm-tab:${kind}:${user}`;
}

// Whether another live page holds this tab's storage (a duplicated tab copies session
// storage): a page holds a lock named after a random key it keeps there; a reload lets
// go of it, a duplicate finds it held and takes a new key and an empty outbox. Without
// the Web Locks API (a page not served from a secure origin: http to another machine)
// the page asks the other pages of the origin on a BroadcastChannel whether one holds
// the key (every page answers for its own, whichever way it claimed it): an answer
// means a copy. With no answer, a reload is the same tab (its old page is gone); any
// other arrival with a key (a copy whose original did not answer in time, a frozen
// background tab) cannot be told from a copy, so it does not send what was kept
// either, and the page says so. Resolves to {key, copied, unsure}.
const CHANNEL_WAIT = 400;  // ms a page waits for another to say it holds the key
let channel = null;        // this page's answers on the BroadcastChannel (kept alive)

export async function claimStorage(kind) {
  const name = `groupcomm-page:${kind}`;
  const fresh = () => `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;
  let key = sessionStorage.getItem(name);
  const kept = key !== null;
  if (!kept) {
    key = fresh();
    sessionStorage.setItem(name, key);
  }
  let verdict = "mine";
  if (navigator.locks) {
    if (!(await holdLock(key))) verdict = "copy";
  } else if (kept) {
    verdict = await askOthers(name, key);
  }
  if (verdict !== "mine") {
    const old = key;
    key = fresh();
    sessionStorage.setItem(name, key);
    // what the other page keeps is its own: this copy drops its copy of it
    for (const stored of Object.keys(sessionStorage)) {
      if (stored.includes(`:${old}:`)) sessionStorage.removeItem(stored);
    }
    if (navigator.locks) await holdLock(key);
  }
  answerFor(name, key);
  return { key, copied: verdict === "copy", unsure: verdict === "unsure" };
}

function holdLock(key) {
  return new Promise((resolve) => {
    navigator.locks.request(`groupcomm-${key}`, { ifAvailable: true }, (lock) => {
      if (lock === null) {
        resolve(false);
        return undefined;
      }
      resolve(true);
      return new Promise(() => {});  // held while the page lives
    });
  });
}

// "copy" when another page answers that it holds `key`; else "mine" for a reload,
// "unsure" otherwise (see claimStorage).
function askOthers(name, key) {
  const reload = performance.getEntriesByType("navigation").some((n) => n.type === "reload");
  if (typeof BroadcastChannel === "undefined") return Promise.resolve(reload ? "mine" : "unsure");
  return new Promise((resolve) => {
    const ask = new BroadcastChannel(name);
    const done = (verdict) => {
      ask.close();
      resolve(verdict);
    };
    const timer = setTimeout(() => done(reload ? "mine" : "unsure"), CHANNEL_WAIT);
    ask.onmessage = (event) => {
      if (event.data && event.data.mine === key) {
        clearTimeout(timer);
        done("copy");
      }
    };
    ask.postMessage({ ask: key });
  });
}

function answerFor(name, key) {
  if (typeof BroadcastChannel === "undefined") return;
  channel = new BroadcastChannel(name);
  channel.onmessage = (event) => {
    if (event.data && event.data.ask === key) channel.postMessage({ mine: key });
  };
}

// What the page says about its storage when it is (or may be) a copy of another tab.
export function claimNote(claim) {
  if (claim && claim.copied) {
    return " This tab is a copy of another open tab: what that tab keeps unsent stays " +
      "with it and is sent by it, not here.";
  }
  if (claim && claim.unsure) {
    return " What an earlier page of this tab kept unsent was not sent again: without Web " +
      "Locks (not a secure origin) this page cannot tell whether another tab, a copy, " +
      "sends it.";
  }
  return "";
}

export class Connection {
  // page: {start(welcome), event(event), status(text, state), dropped() (optional: the
  // connection dropped; a reconnect follows)}
  constructor(kind, page) {
    this.kind = kind;
    this.page = page;
    // deliveries the page has applied (numbered by the gateway from 1), and how many of
    // them the gateway was told of
    this.applied = 0;
    this.acknowledged = 0;
    this.ws = null;
    this.retry = 500;
    this.stopped = false;
    this.counts = { received: 0, sent: 0 };
  }

  open() {
    const who = credential();
    if (!who) {
      this.page.status("no login: open the login link you were given", "error");
      return;
    }
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // ?session=NAME on the page's address picks one of the gateway's sessions
    const ws = new WebSocket(`${scheme}://${location.host}/ws/${this.kind}${location.search}`);
    this.ws = ws;
    this.welcomed = false;
    this.page.status("connecting…", "connecting");
    const tab = Number(sessionStorage.getItem(tabKey(this.kind, who.user))) || undefined;
    ws.onopen = () => ws.send(JSON.stringify({ type: "hello", user: who.user, token: who.token, tab }));
    ws.onmessage = (event) => this.receive(JSON.parse(event.data));
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) {
        if (this.welcomed) this.page.status("left the session", "closed");
        return;
      }
      this.page.status("connection lost; reconnecting…", "connecting");
      if (this.page.dropped) this.page.dropped();
      setTimeout(() => this.open(), this.retry);
      this.retry = Math.min(this.retry * 2, 5000);
    };
  }

  receive(data) {
    for (const event of Array.isArray(data) ? data : [data]) {
      this.counts.received += 1;
      if (event.type === "deliver" && event.n <= this.applied) continue;  // in the state
      if (event.type === "welcome" || event.type === "state") {
        // the state holds the first `handed` deliveries (the gateway acknowledged them)
        this.applied = event.handed;
        this.acknowledged = event.handed;
      }
      if (event.type === "welcome") {
        this.welcomed = true;
        if (event.tab) sessionStorage.setItem(tabKey(this.kind, event.user), String(event.tab));
        this.retry = 500;
        this.page.start(event);
        this.page.status(`${event.member} in the session (causality ${event.module})`, "open");
      } else if (event.type === "fatal") {
        this.page.event(event);
        if (this.ws) this.ws.close();
      } else if (event.type === "error" && !this.welcomed) {
        // refused at login (a wrong credential, no session): trying again would be
        // refused again; a reload tries again
        this.stopped = true;
        this.page.event(event);
        this.page.status(`refused: ${event.error}`, "error");
      } else {
        this.page.event(event);
      }
      if (event.type === "deliver") this.applied = event.n;  // the page applied it
    }
    // say at once what the page applied (one acknowledgement per batch; not on a timer,
    // which a browser slows down in a background tab: a newcomer's snapshot from this
    // tab's member waits for it)
    if (this.applied > this.acknowledged) {
      this.acknowledged = this.applied;
      this.send({ type: "applied", n: this.applied });
    }
  }

  // Send a request; sends carry how many deliveries this tab had applied.
  send(request) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    if ("applied" in request) request.applied = this.applied;
    this.ws.send(JSON.stringify(request));
    this.counts.sent += 1;
    return true;
  }

  get isOpen() {
    return this.welcomed && this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  close() {
    this.stopped = true;
    if (this.ws) this.ws.close();
  }
}

// The application clock's order: true when every entry of a is covered by b and they
// differ (a happened before b).
export function happenedBefore(a, b) {
  let strictly = false;
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const x = a[key] || 0;
    const y = b[key] || 0;
    if (x > y) return false;
    if (x < y) strictly = true;
  }
  return strictly;
}

export function concurrent(a, b) {
  return !happenedBefore(a, b) && !happenedBefore(b, a) && JSON.stringify(sorted(a)) !== JSON.stringify(sorted(b));
}

function sorted(clock) {
  return Object.keys(clock).sort().map((k) => [k, clock[k]]).filter(([, v]) => v);
}

// The member's name without its incarnation (ann~2 -> ann, ann:2~3 -> ann:2).
export function displayName(member) {
  return member.split("~")[0];
}

// The person a member stands for (ann:2~3 -> ann): a tab's member name adds the tab's
// number after a colon.
export function person(member) {
  return displayName(member).split(":")[0];
}

// The visible line that says what this tab is among its person's tabs.
export function tabLine(welcome, keeps) {
  const name = displayName(welcome.member);
  const which = welcome.tab > 1 ? `tab ${welcome.tab} of ${welcome.user}, a member of its own (${name})`
    : `${welcome.user}'s first tab (${name})`;
  return `This is ${which}: each tab of yours is a member of its own, none replaces another. ${keeps}`;
}
