//! The demo page: a live auction on one homeroom room of the kind `auction`,
//! whose rules (examples/auction) decide every bid: the page sends a bid as a
//! CAS write of the `bid` key and shows what the room stored or why it
//! refused. Chat is durable publishes, cursors are signals, and the header
//! and Connection card show what the client is doing.

import { connect, HomeroomError, type Json, type MessageEvent, type Room, type Status } from "homeroom";

import { allBids, BLURB, DEFAULT_LOT, minimumBid, parseBid, parseLot, refusalText, type BidValue, type Lot } from "./auction.js";
import { Cursors } from "./cursors.js";
import { $, ago, colorFor, h, money, short } from "./dom.js";

const ROOM_RE = /^[A-Za-z0-9._:-]{1,64}$/;
const NAME_KEY = "homeroom.demo.name";
const CHAT_KEEP = 200;
const NAMES = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Ken", "Radia", "Linus", "Margaret", "Donald", "Frances", "Niklaus"];

/** Durable Object location hints, as the server names a room's home. */
const HOMES: Record<string, string> = {
  wnam: "Western N. America", enam: "Eastern N. America", sam: "South America", weur: "Western Europe",
  eeur: "Eastern Europe", apac: "Asia-Pacific", oc: "Oceania", afr: "Africa", me: "Middle East",
};

const query = new URLSearchParams(location.search);
const regions = (query.get("regions") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
const token = query.get("token") ?? undefined;

let myName = loadName();
let room: Room | null = null;
let unsubscribe: Array<() => void> = [];
let bidInFlight = false;
let lastShownBid = "";
/** The session of the top bid as last drawn. */
let topSession = "";
let lastState: Status["state"] | null = null;

interface ChatLine {
  session: string;
  name: string;
  text: string;
}
/** Chat lines the room ordered (by seq), and this tab's not yet acked. */
let chat = new Map<number, ChatLine>();
let chatPending: ChatLine[] = [];
let chatNotes: string[] = [];

const cursors = new Cursors($("stage"), $("cursors"), (session) => {
  const m = room?.presence.members.get(session);
  if (!m) return null;
  return { name: nameIn(m.state, session), color: colorIn(m.state, session) };
});

// ---- identity ---------------------------------------------------------------

function loadName(): string {
  try {
    const saved = localStorage.getItem(NAME_KEY);
    if (saved && saved.trim()) return saved.trim().slice(0, 24);
  } catch {
    // no storage: a new name per load
  }
  return `${NAMES[Math.floor(Math.random() * NAMES.length)]} ${10 + Math.floor(Math.random() * 90)}`;
}

function nameIn(state: Record<string, Json> | undefined, session: string): string {
  const n = state?.name;
  return typeof n === "string" && n ? n : "guest " + session.slice(2, 6);
}

/** Display names by session, as members last showed them in presence, so a
 * name stays on a bid or a chat line after its author left. */
const seenNames = new Map<string, string>();

/** The name a session is shown under: its presence name, or the last one seen. */
function nameOf(session: string): string {
  const m = room?.presence.members.get(session);
  if (m) {
    const n = nameIn(m.state, session);
    seenNames.set(session, n);
    return n;
  }
  return seenNames.get(session) ?? "guest " + session.slice(2, 6);
}

/** A bid's bidder: the name the room stored (from the bidder's verified
 * token), except in anonymous dev mode, where the room knows no names (the
 * user is the session) and the page shows the bidder's presence name. */
function bidderName(b: { session: string; name: string }): string {
  return b.name && b.name !== b.session ? b.name : nameOf(b.session);
}

function colorIn(state: Record<string, Json> | undefined, session: string): string {
  const c = state?.color;
  return typeof c === "string" && /^#[0-9a-f]{6}$/i.test(c) ? c : colorFor(session);
}

function myPresence(session: string): Record<string, Json> {
  return { name: myName, color: colorFor(session) };
}

// ---- connecting -------------------------------------------------------------

function join(name: string): void {
  if (!ROOM_RE.test(name) || name === "." || name === "..") {
    toast("Room names are 1-64 letters, digits and . _ : -");
    return;
  }
  for (const off of unsubscribe) off();
  unsubscribe = [];
  room?.close();
  chat = new Map();
  chatPending = [];
  chatNotes = [];
  bidInFlight = false;
  lastShownBid = "";
  topSession = "";
  lastState = null;
  history.replaceState(null, "", location.pathname + location.search + "#" + encodeURIComponent(name));
  ($("room-name") as HTMLInputElement).value = name;

  const r = connect({
    room: name,
    kind: "auction",
    ...(regions.length ? { regions } : {}),
    ...(token ? { token } : {}),
  });
  room = r;
  r.setPresence(myPresence(r.session));
  cursors.attach(r);
  unsubscribe.push(
    r.on("status", renderStatus),
    r.on("state", (e) => {
      if (e.key === "lot") {
        renderLot();
        return;
      }
      if (e.key !== "bid") return;
      const b = parseBid(e.value);
      if (b && b.session !== r.session && !bidInFlight) {
        // Someone else leads now: say so if this tab was leading (or already
        // told it was outbid), else clear old news.
        const n = $("bid-note");
        if (topSession === r.session || n.dataset.outbid) note(`Outbid: ${bidderName(b)} bid ${money(b.amount)}.`, "bad", true);
        else note("");
      }
      renderBid();
    }),
    r.on("resync", (e) => {
      renderLot();
      renderBid();
      if (e.reason !== "initial") {
        chatNotes.push(`Caught up from a snapshot (${e.reason}): some chat lines may be missing.`);
        renderChat();
        toast("Reloaded the room state from a snapshot");
      }
    }),
    r.on("message", onMessage),
    r.on("signal", (s) => {
      if (s.topic === "cursor") cursors.show(s.session, s.data);
    }),
    r.on("presence", renderPresence),
    r.on("summary", renderPresence),
    r.on("error", (e) => toast(`Server said: ${e.code}${e.message && e.message !== e.code ? ` (${e.message})` : ""}`)),
  );
  renderBid();
  renderChat();
  renderPresence();
  renderStatus(r.status);
}

// ---- the auction --------------------------------------------------------------

function currentBid(): { bid: BidValue | null; version: number } {
  const entry = room?.state.get("bid");
  return { bid: parseBid(entry?.value), version: entry?.version ?? 0 };
}

function currentLot(): Lot {
  return parseLot(room?.state.get("lot")?.value) ?? DEFAULT_LOT;
}

function note(text: string, kind: "ok" | "bad" | "wait" | "" = "", outbid = false): void {
  const el = $("bid-note");
  el.textContent = text;
  el.dataset.kind = kind;
  delete el.dataset.code;
  if (outbid) el.dataset.outbid = "1";
  else delete el.dataset.outbid;
}

function placeBid(amount: number): void {
  const r = room;
  if (!r || bidInFlight) return;
  if (!Number.isFinite(amount) || amount <= 0) {
    note("Type an amount in dollars.", "bad");
    return;
  }
  // The room decides: the page sends the amount; the rules check the
  // minimum, the step and the end time, and name the bidder from its token.
  const { version } = currentBid();
  const value = { amount: Math.round(amount) };
  bidInFlight = true;
  renderBid();
  note(
    r.status.state === "open" ? `Placing ${money(amount)}…` : `Offline: your ${money(amount)} bid is queued and goes out on reconnect.`,
    "wait",
  );
  r.set("bid", value as unknown as Json, { ifVersion: version }).then(
    (v) => {
      note(`You lead with ${money(amount)} (version ${v}).`, "ok");
    },
    (e: unknown) => {
      if (e instanceof HomeroomError && e.code === "conflict") {
        const now = currentBid().bid;
        note(`Outbid: someone got there first${now ? ` with ${money(now.amount)}` : ""}. Try again.`, "bad", true);
      } else if (e instanceof HomeroomError) {
        const el = $("bid-note");
        note(refusalText(e.code, e.message), "bad");
        el.dataset.code = e.code;
      } else note("Bid not placed.", "bad");
    },
  ).finally(() => {
    if (room === r) {
      bidInFlight = false;
      renderBid();
    }
  });
}

/** The lot: its title, and the time left or who won. */
function renderLot(): void {
  const lot = currentLot();
  $("lot-title").textContent = lot.title;
  const clock = $("lot-clock");
  clock.dataset.open = String(lot.open);
  if (lot.open && lot.ends_at > 0) {
    const s = Math.max(0, Math.ceil((lot.ends_at - Date.now()) / 1000));
    clock.textContent = s > 0 ? `Closes in ${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}` : "Closing…";
  } else if (!lot.open) {
    const w = lot.winner;
    clock.textContent = w ? `Closed: won by ${w.session === room?.session ? "you" : bidderName(w)} for ${money(w.amount)}` : "Closed: no bids";
  } else clock.textContent = "";
  ($("bid-button") as HTMLButtonElement).disabled = bidInFlight || !lot.open;
  for (const b of $("quick-bids").querySelectorAll("button")) b.disabled = bidInFlight || !lot.open;
}

function renderBid(): void {
  const lot = currentLot();
  const { bid, version } = currentBid();
  const amountEl = $("bid-amount");
  const shown = bid ? `${bid.amount}@${version}` : "";
  amountEl.textContent = bid ? money(bid.amount) : money(lot.start);
  amountEl.dataset.version = String(version);
  if (shown && shown !== lastShownBid && lastShownBid) {
    amountEl.classList.remove("flash");
    void amountEl.offsetWidth;
    amountEl.classList.add("flash");
  }
  lastShownBid = shown;
  topSession = bid?.session ?? "";
  const by = $("bid-by");
  by.replaceChildren();
  if (bid) {
    const mine = bid.session === room?.session;
    by.append("by ", h("b", {}, mine ? "you" : bidderName(bid)), h("span", { class: "tag" }, bid.region), " · ", agoSpan(bid.at));
  } else by.append(`Starting price. No bids yet.`);

  const min = minimumBid(lot, bid);
  const base = bid ? bid.amount : lot.start - lot.step;
  const quick = $("quick-bids");
  quick.replaceChildren(
    ...[min, base + 50, base + 100].map((amt, i) => {
      const b = h("button", { type: "button", "data-amount": String(amt) }, i === 0 ? `Bid ${money(amt)}` : money(amt));
      b.disabled = bidInFlight || !lot.open;
      b.addEventListener("click", () => placeBid(amt));
      return b;
    }),
  );
  ($("bid-button") as HTMLButtonElement).disabled = bidInFlight || !lot.open;
  const input = $("bid-input") as HTMLInputElement;
  input.placeholder = money(min) + "+";

  const all = allBids(bid, version);
  $("history-count").textContent = all.length ? `${all.length} bid${all.length === 1 ? "" : "s"}` : "";
  const list = $("history");
  list.replaceChildren(
    ...(all.length
      ? all.map((b) =>
          h(
            "li",
            { "data-version": String(b.version ?? ""), "data-amount": String(b.amount) },
            h("span", { class: "amt" }, money(b.amount)),
            h(
              "span",
              { class: "who" },
              b.session === room?.session ? "you" : bidderName(b),
              h("span", { class: "tag" }, b.region),
            ),
            h("span", { class: "meta" }, agoSpan(b.at), ` · v${b.version ?? "?"}`),
          ),
        )
      : [h("li", { class: "empty" }, "No bids yet.")]),
  );
}

function agoSpan(at: number): HTMLElement {
  return h("span", { "data-at": String(at) }, ago(at));
}

// ---- chat -----------------------------------------------------------------------

function onMessage(m: MessageEvent): void {
  if (m.topic !== "chat") return;
  // The room stores a chat line as `{text}`: who wrote it is the message's
  // session, never a name the writer put in it.
  const d = m.data as { text?: unknown } | null;
  if (!d || typeof d.text !== "string") return;
  chat.set(m.seq, { session: m.session, name: nameOf(m.session), text: d.text });
  if (chat.size > CHAT_KEEP) chat.delete(Math.min(...chat.keys()));
  renderChat();
}

function sendChat(text: string): void {
  const r = room;
  if (!r) return;
  const line: ChatLine = { session: r.session, name: myName, text };
  chatPending.push(line);
  renderChat();
  const done = () => {
    chatPending = chatPending.filter((c) => c !== line);
  };
  r.publish("chat", { text }).then(
    (seq) => {
      done();
      if (room === r && !chat.has(seq)) chat.set(seq, line); // its message frame follows
      renderChat();
    },
    (e: unknown) => {
      done();
      renderChat();
      toast(`Message not sent: ${e instanceof HomeroomError ? e.code : "error"}`);
    },
  );
}

function renderChat(): void {
  const list = $("chat");
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 30;
  const line = (c: ChatLine, seq: number | null) =>
    h(
      "li",
      { "data-seq": seq === null ? "" : String(seq) },
      h("span", { class: "who", style: `color:${colorFor(c.session)}` }, c.session === room?.session ? "you" : c.name),
      c.text,
      seq === null ? h("span", { class: "pending" }, room?.status.state === "open" ? "sending…" : "queued") : null,
    );
  const items = [
    ...chatNotes.map((n) => h("li", { class: "empty" }, n)),
    ...[...chat.entries()].sort((a, b) => a[0] - b[0]).map(([seq, c]) => line(c, seq)),
    ...chatPending.map((c) => line(c, null)),
  ];
  list.replaceChildren(...(items.length ? items : [h("li", { class: "empty" }, "Say hello to the other bidders.")]));
  if (atBottom) list.scrollTop = list.scrollHeight;
}

// ---- presence -------------------------------------------------------------------

function renderPresence(): void {
  const r = room;
  if (!r) return;
  const p = r.presence;
  const regionsNow = Object.entries(p.regions).sort((a, b) => b[1].members - a[1].members || a[0].localeCompare(b[0]));
  const count = $("people-count");
  count.replaceChildren(
    String(p.count),
    h("small", {}, ` ${p.count === 1 ? "person" : "people"} · ${regionsNow.length} region${regionsNow.length === 1 ? "" : "s"}`),
  );
  count.dataset.count = String(p.count);
  const max = Math.max(1, ...regionsNow.map(([, c]) => c.members));
  $("regions").replaceChildren(
    ...regionsNow.map(([name, c]) =>
      h(
        "div",
        { class: "region", "data-region": name, "data-members": String(c.members) },
        h("b", {}, name),
        h("div", { class: "bar" }, h("i", { style: `width:${(100 * c.members) / max}%` })),
        h("span", {}, String(c.members)),
      ),
    ),
  );
  if (r.status.state === "open") $("people-note").textContent = p.large ? "large room: counts only" : "";
  const members = [...p.members.entries()].sort(([a, ma], [b, mb]) =>
    a === r.session ? -1 : b === r.session ? 1 : nameIn(ma.state, a).localeCompare(nameIn(mb.state, b)),
  );
  $("members").replaceChildren(
    ...members.map(([session, m]) =>
      h(
        "li",
        { "data-session": session, "data-region": m.region },
        h("span", { class: "dot", style: `background:${colorIn(m.state, session)}` }),
        h("span", { class: "name" }, nameOf(session)),
        session === r.session ? h("span", { class: "tag you" }, "you") : null,
        h("span", { class: "tag region-tag" }, m.region),
      ),
    ),
  );
  cursors.refresh(new Set(p.members.keys()));
}

// ---- connection status --------------------------------------------------------------

function renderStatus(s: Status): void {
  const pill = $("status");
  pill.dataset.state = s.state;
  pill.dataset.why = s.why ?? "";
  const secs = s.retryAt ? Math.max(0, Math.ceil((s.retryAt - Date.now()) / 1000)) : null;
  const text =
    s.state === "open"
      ? `Live${s.region ? ` · ${s.region}` : ""}`
      : s.state === "connecting"
        ? "Connecting…"
        : s.state === "reconnecting"
          ? secs !== null
            ? `Reconnecting in ${secs} s`
            : "Reconnecting…"
          : (STOPPED[s.why ?? ""] ?? "Disconnected");
  pill.textContent = text;

  const extra = $("status-extra");
  extra.replaceChildren();
  if (s.state === "reconnecting" || s.state === "connecting") {
    const bits = [];
    if (s.attempt > 0) bits.push(`attempt ${s.attempt}`);
    if (s.pending > 0) bits.push(`${s.pending} waiting to send`);
    extra.append(bits.join(" · "));
  } else if (s.state === "closed") {
    const again = h("button", { type: "button" }, "Reconnect here");
    again.addEventListener("click", () => room && join(room.room));
    extra.append(again);
  }

  $("c-state").textContent = s.state + (s.why && s.state !== "open" ? ` · ${describeWhy(s.why)}` : "");
  document.body.dataset.conn = s.state;
  $("people-note").textContent =
    s.state === "open" ? (room?.presence.large ? "large room: counts only" : "") : "as of the last connection";
  if (s.state !== "open") cursors.clear();
  $("c-region").textContent = s.region ?? "—";
  $("c-home").textContent = s.home ? (HOMES[s.home] ? `${HOMES[s.home]} (${s.home})` : s.home) : "—";
  const ep = $("c-endpoint");
  ep.textContent = s.endpoint ? new URL(s.endpoint).host + (s.endpointChoice && s.endpointChoice !== "only" ? ` (${s.endpointChoice})` : "") : "—";
  $("c-seq").textContent = String(s.seq);
  const ep2 = $("c-epoch");
  ep2.textContent = short(s.epoch, 14);
  ep2.title = s.epoch ?? "";
  $("c-resume").textContent = s.state === "open" || s.epoch ? (s.resumed ? `resumed, ${s.missed} missed` : "fresh start") : "—";
  $("c-pending").textContent = String(s.pending);
  const sess = $("c-session");
  sess.textContent = room?.session ?? "—";
  sess.title = room?.session ?? "";

  if (lastState === "reconnecting" && s.state === "open") {
    toast(s.resumed ? `Back online: resumed, ${s.missed} missed update${s.missed === 1 ? "" : "s"} replayed` : "Back online");
  }
  if (lastState !== s.state && s.state === "open") {
    renderChat();
    if (bidInFlight) note("Reconnected: sending your bid…", "wait");
  }
  lastState = s.state;
}

const CLOSES: Record<string, string> = {
  "1001": "server draining",
  "1006": "connection lost",
  "1008": "token refused",
  "1009": "message too large",
  "1011": "server error",
  "4008": "heartbeat timeout",
  "4013": "fell behind",
  "4029": "rate limited",
  "4401": "token expired",
  "4409": "session taken",
  "4429": "too many tabs",
};

/** Why a closed connection stays closed, for the status pill. */
const STOPPED: Record<string, string> = {
  superseded: "Open in another tab",
  auth: "Sign-in refused",
  kicked: "Removed from the room",
  blocked: "Blocked from the room",
  room_deleted: "Room deleted",
  session_taken: "Session in use",
};

function describeWhy(why: string): string {
  const code = /^close (\d+)$/.exec(why)?.[1];
  if (code) return `${CLOSES[code] ?? "closed"} (${code})`;
  return { heartbeat: "no pong", gap: "seq gap", timeout: "connect timeout", error: "connect failed" }[why] ?? why;
}

// ---- misc ---------------------------------------------------------------------------

let toastTimer: ReturnType<typeof setTimeout> | null = null;
function toast(text: string): void {
  const t = $("toast");
  t.textContent = text;
  t.classList.add("show");
  if (toastTimer) clearTimeout(toastTimer);
  toastTimer = setTimeout(() => t.classList.remove("show"), 3_500);
}

$("lot-title").textContent = DEFAULT_LOT.title;
$("lot-blurb").textContent = BLURB;
setInterval(renderLot, 1000);
($("name-input") as HTMLInputElement).value = myName;

$("room-form").addEventListener("submit", (e) => {
  e.preventDefault();
  join(($("room-name") as HTMLInputElement).value.trim());
});
$("bid-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = $("bid-input") as HTMLInputElement;
  const amount = Number(input.value);
  placeBid(amount);
  input.value = "";
});
$("chat-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = $("chat-input") as HTMLInputElement;
  const text = input.value.trim();
  if (text) sendChat(text);
  input.value = "";
});
$("name-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = ($("name-input") as HTMLInputElement).value.trim().slice(0, 24);
  if (!v) return;
  myName = v;
  try {
    localStorage.setItem(NAME_KEY, v);
  } catch {
    // not kept across loads
  }
  if (room) room.setPresence(myPresence(room.session));
});

// The reconnect countdown and the "x s ago" labels.
setInterval(() => {
  if (!room) return;
  const s = room.status;
  if (s.state !== "open") renderStatus(s);
  for (const el of document.querySelectorAll<HTMLElement>("[data-at]")) el.textContent = ago(Number(el.dataset.at));
}, 1_000);

function roomFromHash(): string {
  try {
    return decodeURIComponent(location.hash.slice(1));
  } catch {
    return "";
  }
}
join(roomFromHash() || "auction");
