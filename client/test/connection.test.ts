//! The connect cycle on a fake clock: what each close code does, tokens,
//! connect timeouts, status events and close().

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { Status } from "../src/room.js";
import { welcome, world } from "./fakes.js";
import { connected, room } from "./helpers.js";

describe("close codes", () => {
  it("1006: reconnects after a full-jitter delay within 2 s, then within 4 s", async () => {
    const { w } = await connected();
    const first = w.last();
    first.serverClose(1006);
    assert.equal(w.sockets.length, 1, "no reconnect in the same tick");
    await w.clock.advance(2_000);
    assert.equal(w.sockets.length, 2, "reconnected within 2 s");
    const second = w.last();
    const d1 = second.createdAt - (w.clock.t - 2_000);
    assert.ok(d1 >= 0 && d1 < 2_000);
    second.refuse(); // the server is still down
    const failedAt = w.clock.t;
    await w.clock.advance(4_000);
    assert.equal(w.sockets.length, 3, "the next attempt within 4 s");
    assert.ok(w.last().createdAt - failedAt < 4_000);
  });

  it("1001: reconnects within the 1 s jitter window", async () => {
    const { w, r } = await connected();
    w.last().serverClose(1001, "draining");
    assert.equal(r.status.state, "reconnecting");
    const at = r.status.retryAt! - w.clock.t;
    assert.ok(at >= 0 && at < 1_000, `retry in ${at} ms`);
    await w.clock.advance(1_000);
    assert.equal(w.sockets.length, 2);
  });

  it("4001: never reconnects, and says the session is open elsewhere", async () => {
    const { w, r } = await connected();
    const pending = r.publish("chat", "hi");
    w.last().serverClose(4001, "superseded");
    await assert.rejects(pending, { code: "superseded" });
    await w.clock.advance(10 * 60_000);
    assert.equal(w.sockets.length, 1);
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "superseded");
    assert.deepEqual(r.status.lastClose, { code: 4001, reason: "superseded" });
  });

  it("1000: never reconnects", async () => {
    const { w, r } = await connected();
    w.last().serverClose(1000);
    await w.clock.advance(10 * 60_000);
    assert.equal(w.sockets.length, 1);
    assert.equal(r.status.state, "closed");
    await assert.rejects(r.publish("chat", 1), { code: "closed" });
  });

  it("1008: calls getToken before reconnecting, with the new token", async () => {
    const w = world();
    const tokens = ["t-one", "t-two"];
    const calls: number[] = [];
    room(w, {
      getToken: async () => {
        calls.push(w.clock.t);
        return tokens.shift()!;
      },
    });
    await w.clock.advance(0);
    assert.equal(calls.length, 1, "a token before the first connect");
    assert.equal(w.last().params.get("token"), "t-one");
    welcome(w.last());
    w.last().serverClose(1006);
    await w.clock.advance(2_000);
    assert.equal(calls.length, 1, "a 1006 keeps the token");
    assert.equal(w.last().params.get("token"), "t-one");
    welcome(w.last());
    await w.clock.advance(10_000);
    w.last().serverClose(1008, "token expired");
    await w.clock.advance(2_000);
    assert.equal(calls.length, 2, "a 1008 fetches a new token");
    assert.equal(w.sockets.length, 3);
    assert.equal(w.last().params.get("token"), "t-two");
    assert.ok(calls[1]! <= w.last().createdAt);
  });

  it("a getToken that never settles is given up after the connect timeout, and asked again", async () => {
    // A token fetch lost in a network change: the room waited on it for good (no socket, so
    // no connect timer; nothing to retry), connecting until the app called reconnect().
    const w = world();
    let calls = 0;
    const r = room(w, {
      connectTimeoutMs: 5_000,
      getToken: () => {
        calls++;
        return calls === 1 ? new Promise<string>(() => {}) : Promise.resolve("t-two");
      },
    });
    await w.clock.advance(0);
    assert.equal(calls, 1);
    assert.equal(w.sockets.length, 0, "no socket while the token is awaited");
    await w.clock.advance(5_000);
    assert.notEqual(r.status.retryAt, null, "given up, a retry set");
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(calls, 2, "asked again after a backoff");
    assert.equal(w.last().params.get("token"), "t-two");
    welcome(w.last());
    assert.equal(r.status.state, "open");
  });

  it("a token that comes after the connect timeout is kept for the next attempt", async () => {
    // The first fetch answers at 6 s (after the 5 s timeout), every later one never: only the
    // late token, kept, can connect.
    const w = world();
    let calls = 0;
    room(w, {
      connectTimeoutMs: 5_000,
      getToken: () => {
        calls++;
        if (calls > 1) return new Promise<string>(() => {});
        return new Promise<string>((resolve) => w.env.setTimeout(() => resolve("t-late"), 6_000));
      },
    });
    await w.clock.advance(0);
    await w.clock.advance(5_500);
    assert.equal(w.sockets.length, 0, "given up at 5 s");
    await w.clock.advance(60_000);
    assert.ok(w.sockets.length > 0, "connected with the late token");
    assert.equal(w.last().params.get("token"), "t-late");
  });

  it("refreshes a token whose exp has passed before connecting", async () => {
    const w = world();
    const payload = (exp: number) => Buffer.from(JSON.stringify({ room: "r1", sub: "u", exp })).toString("base64url") + ".sig";
    const expiresSoon = payload(Math.floor(w.clock.t / 1000) + 60);
    let calls = 0;
    room(w, { token: expiresSoon, getToken: () => (++calls, payload(Math.floor(w.clock.t / 1000) + 3600)) });
    await w.clock.advance(0);
    assert.equal(calls, 0, "a token given up front is used while valid");
    welcome(w.last());
    await w.clock.advance(120_000);
    w.last().serverClose(1006);
    await w.clock.advance(2_000);
    assert.equal(calls, 1, "an expired token is replaced before the reconnect");
    assert.notEqual(w.last().params.get("token"), expiresSoon);
  });

  it("4029: waits 30-60 s", async () => {
    const { w, r } = await connected();
    w.last().serverClose(4029, "rate limit abuse");
    const wait = r.status.retryAt! - w.clock.t;
    assert.ok(wait >= 30_000 && wait < 60_000, `${wait}`);
    await w.clock.advance(29_999);
    assert.equal(w.sockets.length, 1);
    await w.clock.advance(30_001);
    assert.equal(w.sockets.length, 2);
  });

  it("4008 (server heartbeat timeout): reconnects with normal backoff", async () => {
    const { w } = await connected();
    w.last().serverClose(4008, "heartbeat timeout");
    await w.clock.advance(2_000);
    assert.equal(w.sockets.length, 2);
  });

  it("a close of an older socket after a reconnect is ignored", async () => {
    const { w, r } = await connected();
    const old = w.last();
    old.serverClose(1006);
    await w.clock.advance(2_000);
    welcome(w.last());
    old.serverClose(4001); // the old TCP finally reports in
    assert.equal(r.status.state, "open");
    assert.equal(w.sockets.length, 2);
  });
});

describe("connect cycle", () => {
  it("gives up on a connect with no welcome after 10 s and backs off", async () => {
    const w = world();
    const r = room(w);
    await w.clock.advance(0);
    w.last().open(); // opened, but the welcome never comes
    await w.clock.advance(10_000);
    assert.ok(w.sockets[0]!.closedByClient, "the stuck socket is closed");
    assert.equal(r.status.why, "timeout");
    await w.clock.advance(2_000);
    assert.equal(w.sockets.length, 2);
  });

  it("resets the backoff after a connection that stayed up 10 s, not before", async () => {
    const { w, r } = await connected();
    for (let i = 0; i < 4; i++) {
      w.last().serverClose(1006);
      await w.clock.advance(r.status.retryAt! - w.clock.t);
    }
    assert.equal(r.status.attempt, 4);
    // Welcomed, then dropped at once: still backing off (window 2 s × 2^4, capped at 20 s).
    welcome(w.last(), { seq: 0 });
    w.last().serverClose(1006);
    assert.equal(r.status.attempt, 5);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    // Welcomed and up for 10 s: the next drop starts over at the 2 s window.
    welcome(w.last(), { seq: 0 });
    await w.clock.advance(10_000);
    w.last().serverClose(1006);
    assert.equal(r.status.attempt, 1);
    assert.ok(r.status.retryAt! - w.clock.t < 2_000);
  });

  it("a room that drains every client right after its welcome gets backoff, not a loop", async () => {
    const { w, r } = await connected();
    await w.clock.advance(10_000);
    w.last().serverClose(1001, "draining");
    assert.ok(r.status.retryAt! - w.clock.t < 1_000, "the first drain: prompt");
    let total = 0;
    for (let k = 1; k <= 6; k++) {
      const wait = r.status.retryAt! - w.clock.t;
      total += wait;
      await w.clock.advance(wait);
      welcome(w.last());
      w.last().serverClose(1001, "draining");
      assert.equal(r.status.attempt, k + 1);
      assert.ok(r.status.retryAt! - w.clock.t < Math.min(20_000, 2_000 * 2 ** k));
    }
    assert.ok(total > 6_000, `six drains in a row took ${total} ms of waiting`);
  });

  it("reports status changes: connecting, open, reconnecting, open, closed", async () => {
    const w = world();
    const seen: Status["state"][] = [];
    const r = room(w);
    r.on("status", (s) => {
      if (seen[seen.length - 1] !== s.state) seen.push(s.state);
    });
    await w.clock.advance(0);
    welcome(w.last(), { region: "OC", home: "SYD" });
    assert.equal(r.status.region, "OC");
    assert.equal(r.status.home, "SYD");
    w.last().serverClose(1006);
    await w.clock.advance(2_000);
    welcome(w.last());
    r.close();
    assert.deepEqual(seen, ["open", "reconnecting", "open", "closed"]);
  });

  it("close(): closes the socket with 1000 and never reconnects", async () => {
    const { w, r } = await connected();
    r.close();
    assert.deepEqual(w.last().closedByClient, { code: 1000, reason: "client closed" });
    w.last().serverClose(1006);
    await w.clock.advance(120_000);
    assert.equal(w.sockets.length, 1);
    assert.equal(w.clock.pending, 0, "no timers left behind");
  });

  it("builds the room URL from the endpoint", async () => {
    const w = world();
    room(w, { url: "http://127.0.0.1:8787/", room: "a.b:c-d", session: "s-abcdefgh" });
    await w.clock.advance(0);
    assert.equal(w.last().url, "ws://127.0.0.1:8787/rooms/a.b%3Ac-d/ws?session=s-abcdefgh");
  });

  it("refuses bad room names up front", () => {
    const w = world();
    assert.throws(() => room(w, { room: "" }), TypeError);
    assert.throws(() => room(w, { room: ".." }), TypeError);
    assert.throws(() => room(w, { room: "a/b" }), TypeError);
  });
});
