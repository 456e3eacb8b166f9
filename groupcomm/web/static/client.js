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

export class Connection {
  // page: {start(welcome), event(event), status(text, state)}
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
    const ws = new WebSocket(`${scheme}://${location.host}/ws/${this.kind}`);
    this.ws = ws;
    this.welcomed = false;
    this.page.status("connecting…", "connecting");
    ws.onopen = () => ws.send(JSON.stringify({ type: "hello", user: who.user, token: who.token }));
    ws.onmessage = (event) => this.receive(JSON.parse(event.data));
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) {
        if (this.welcomed) this.page.status("left the session", "closed");
        return;
      }
      this.page.status("connection lost; reconnecting…", "connecting");
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

// The member's name without its incarnation (ann~2 -> ann).
export function displayName(member) {
  return member.split("~")[0];
}
