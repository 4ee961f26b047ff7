//! Liveness: pings every 30 s, a pong missing for 35 s is a miss, two misses
//! close the socket and reconnect.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { PING } from "../src/protocol.js";
import { connected } from "./helpers.js";

describe("heartbeat", () => {
  it("sends the exact ping text every 30 s", async () => {
    const { w } = await connected();
    const s = w.last();
    const pings = () => s.sent.filter((t) => t === PING).length;
    await w.clock.advance(29_999);
    assert.equal(pings(), 0);
    await w.clock.advance(1);
    assert.equal(pings(), 1);
    s.receive({ type: "pong" });
    await w.clock.advance(30_000);
    assert.equal(pings(), 2);
    assert.equal(s.sent.filter((t) => t.includes("ping"))[0], '{"type":"ping"}');
  });

  it("keeps a socket whose pongs come back", async () => {
    const { w, r } = await connected();
    const s = w.last();
    for (let i = 0; i < 20; i++) {
      await w.clock.advance(30_000);
      s.receive({ type: "pong" });
    }
    assert.equal(w.sockets.length, 1);
    assert.equal(r.status.state, "open");
  });

  it("tolerates one missed pong", async () => {
    const { w, r } = await connected();
    const s = w.last();
    await w.clock.advance(30_000 + 35_000); // ping 1 unanswered: one miss
    s.receive({ type: "pong" }); // ping 2 answered
    for (let i = 0; i < 4; i++) {
      await w.clock.advance(30_000);
      s.receive({ type: "pong" });
    }
    assert.equal(r.status.state, "open");
    assert.equal(w.sockets.length, 1);
  });

  it("declares the socket dead after two missed pongs, closes it and reconnects", async () => {
    const { w, r } = await connected();
    const s = w.last();
    // Ping at 30 s (due 65 s) and 60 s (due 95 s): the second miss is at 95 s.
    await w.clock.advance(94_999);
    assert.equal(r.status.state, "open");
    const closed = () => s.closedByClient;
    assert.equal(closed(), null);
    await w.clock.advance(1);
    assert.equal(r.status.state, "reconnecting");
    assert.equal(r.status.why, "heartbeat");
    assert.equal(closed()?.code, 4002, "the dead socket is closed by the client");
    await w.clock.advance(2_000);
    assert.equal(w.sockets.length, 2, "a new connection within the first backoff window");
  });

  it("stops pinging a socket that closed", async () => {
    const { w } = await connected();
    const s = w.last();
    s.serverClose(1000);
    await w.clock.advance(120_000);
    assert.equal(s.sent.filter((t) => t === PING).length, 0);
    assert.equal(w.clock.pending, 0);
  });
});
