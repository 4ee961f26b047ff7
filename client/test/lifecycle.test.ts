//! The handle's life: built without touching the page (server rendering),
//! started, reconnected by hand, reopened after close(), woken by the
//! page's `online` / `visibilitychange` events, and a first token refused
//! right after the open (4401 before any welcome) then replaced.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { connect } from "../src/homeroom.js";
import { Room } from "../src/room.js";
import { message, welcome, world } from "./fakes.js";
import { connected, room, URL } from "./helpers.js";

const PAGE_GLOBALS = ["window", "document", "WebSocket", "sessionStorage", "localStorage", "location", "navigator"] as const;

/** Runs `fn` with every page global a tripwire; returns the names read. */
function tripwired(fn: () => void): string[] {
  const g = globalThis as Record<string, unknown>;
  const saved = PAGE_GLOBALS.map((k) => [k, Object.getOwnPropertyDescriptor(g, k)] as const);
  const touched: string[] = [];
  for (const k of PAGE_GLOBALS) {
    Object.defineProperty(g, k, {
      configurable: true,
      get() {
        touched.push(k);
        throw new Error(`${k} read during construction`);
      },
    });
  }
  try {
    fn();
  } finally {
    for (const [k, d] of saved) {
      if (d) Object.defineProperty(g, k, d);
      else delete g[k];
    }
  }
  return touched;
}

describe("server-side rendering", () => {
  it("new Room and connect({autoConnect: false}) read nothing of the page, and report idle", () => {
    let rooms: Room[] = [];
    const touched = tripwired(() => {
      rooms = [new Room({ room: "r1" }), connect({ room: "r2", url: URL, autoConnect: false, presence: { name: "x" } })];
      for (const r of rooms) {
        assert.equal(r.status.state, "idle");
        assert.equal(r.status.session, "");
        assert.equal(r.presence.count, 0);
        assert.equal(r.state.size, 0);
        assert.equal(r.signal("cursor", 1), false);
        r.setPresence({ name: "y" });
        void r.publish("chat", "queued until started");
        r.subscribe(() => {})();
      }
    });
    assert.deepEqual(touched, []);
    assert.equal(rooms[1]!.status.pending, 1);
  });

  it("start() is where the page is read: the socket, the session, the wake-up events", async () => {
    const w = world();
    let reads = 0;
    const r = new Room({
      room: "r1",
      url: URL,
      env: {
        ...w.env,
        onWake: (fn) => {
          reads += 1;
          return w.page.source(fn);
        },
      },
    });
    assert.equal(w.sockets.length, 0);
    assert.equal(w.session.map.size, 0, "no session stored yet");
    assert.equal(reads, 0);
    r.start();
    assert.equal(w.sockets.length, 1);
    assert.equal(w.session.map.size, 1);
    assert.equal(reads, 1);
    r.start(); // a no-op while running
    assert.equal(w.sockets.length, 1);
  });
});

describe("reconnect()", () => {
  it("drops the socket, dials at once and resumes; unacked sends are written again", async () => {
    const { w, r } = await connected({ welcome: { seq: 4, epoch: "e-r" } });
    const first = w.last();
    first.receive(message(5));
    const p = r.publish("chat", "kept");
    const id = first.ofType("publish")[0]!.id;
    r.reconnect();
    assert.deepEqual(first.closedByClient, { code: 4004, reason: "reconnect" });
    assert.equal(w.sockets.length, 2, "in the same tick");
    assert.equal(r.status.state, "reconnecting");
    const second = w.last();
    assert.equal(second.params.get("since"), "5");
    assert.equal(second.params.get("epoch"), "e-r");
    first.serverClose(1000); // the old socket's late close changes nothing
    welcome(second, { seq: 5, epoch: "e-r", resumed: true });
    assert.equal(r.status.state, "open");
    assert.equal(second.ofType("publish")[0]!.id, id);
    second.receive({ type: "ack", id, seq: 6 });
    assert.equal(await p, 6);
  });

  it("cuts a backoff short, and restarts a room that stopped", async () => {
    const w = world();
    const r = room(w, { token: "fixed" });
    await w.clock.advance(0);
    w.last().refuse();
    assert.notEqual(r.status.retryAt, null);
    r.reconnect();
    assert.equal(w.sockets.length, 2);
    assert.equal(r.status.retryAt, null);
    welcome(w.last());
    w.last().serverClose(4401, "token_expired"); // no getToken: stops
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "auth");
    r.reconnect();
    assert.equal(w.sockets.length, 3);
    assert.equal(r.status.state, "reconnecting");
    assert.equal(r.status.why, null);
  });
});

describe("reopening after close()", () => {
  it("start() opens it again: same session, resumes from the last seq, sends work again", async () => {
    const { w, r } = await connected({ welcome: { seq: 7, epoch: "e-c" } });
    const session = r.session;
    w.last().receive(message(8));
    const lost = r.publish("chat", "rejected by close");
    r.close();
    await assert.rejects(lost, { code: "closed" });
    assert.equal(r.status.state, "closed");
    assert.equal(w.page.listening, 0, "wake-up listeners removed at close");
    r.start();
    assert.equal(w.page.listening, 1);
    assert.equal(r.status.state, "reconnecting");
    const s = w.last();
    assert.equal(w.sockets.length, 2);
    assert.equal(s.params.get("session"), session);
    assert.equal(s.params.get("since"), "8");
    welcome(s, { seq: 8, epoch: "e-c", resumed: true });
    const p = r.publish("chat", "after");
    const [f] = s.ofType("publish");
    s.receive({ type: "ack", id: f!.id, seq: 9 });
    assert.equal(await p, 9);
  });
});

describe("the page's wake-ups", () => {
  for (const why of ["online", "visible"] as const) {
    it(`${why}: a room waiting out a backoff dials at once`, async () => {
      const { w, r } = await connected();
      w.last().serverClose(1006);
      await w.clock.advance(0);
      // Fail a few times so the backoff is long.
      for (let i = 0; i < 3; i++) {
        await w.clock.advance(r.status.retryAt! - w.clock.t);
        w.last().refuse();
      }
      const before = w.sockets.length;
      assert.ok(r.status.retryAt! - w.clock.t >= 0);
      w.page.fire(why);
      assert.equal(w.sockets.length, before + 1, "dialled in the same tick");
      welcome(w.last(), { resumed: true });
      assert.equal(r.status.state, "open");
    });
  }

  it("an open room checks its socket at once: kept when the pong comes, dropped and resumed when it does not", async () => {
    const { w, r } = await connected({ welcome: { seq: 3, epoch: "e-w" } });
    const s = w.last();
    const pings = (): number => s.ofType("ping").length;
    w.page.fire("visible");
    assert.equal(pings(), 1, "a ping at once");
    w.page.fire("online");
    assert.equal(pings(), 1, "one check at a time");
    await w.clock.advance(1_000);
    s.receive({ type: "pong" });
    await w.clock.advance(10_000);
    assert.equal(r.status.state, "open", "alive: kept");
    assert.equal(w.sockets.length, 1);
    w.page.fire("online");
    assert.equal(pings(), 2);
    await w.clock.advance(4_999);
    assert.equal(r.status.state, "open");
    await w.clock.advance(1);
    assert.equal(r.status.state, "reconnecting", "no pong in 5 s: dead");
    assert.equal(s.closedByClient?.code, 4002);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(w.last().params.get("since"), "3");
  });

  it("does not cut short the wait a room imposed (4029), nor wake a closed room", async () => {
    const { w, r } = await connected();
    w.last().serverClose(4029);
    w.page.fire("online");
    assert.equal(w.sockets.length, 1);
    r.close();
    w.page.fire("visible");
    assert.equal(w.sockets.length, 1);
  });
});

describe("a first token refused right after the open", () => {
  it("4401 token_expired before any welcome: a new token from getToken, then connected", async () => {
    const w = world();
    const handed: string[] = [];
    const getToken = async (): Promise<string> => {
      handed.push(handed.length === 0 ? "expired" : "good");
      return handed[handed.length - 1]!;
    };
    const r = room(w, { getToken });
    await w.clock.advance(0);
    assert.equal(w.last().params.get("token"), "expired");
    w.last().open();
    w.last().serverClose(4401, "token_expired");
    assert.equal(r.status.state, "connecting", "never open yet");
    assert.deepEqual(r.status.lastClose, { code: 4401, reason: "token_expired" });
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(w.last().params.get("token"), "good");
    welcome(w.last());
    assert.equal(r.status.state, "open");
    assert.deepEqual(r.status.lastClose, { code: 4401, reason: "token_expired" }, "the refusal stays visible");
  });
});
