//! The tab's shared rooms (shared.ts), what `useRoom` stands on: one Room
//! (one socket) per (deployment, kind, room), counted holds, a release that
//! closes only after a grace period, so a StrictMode mount → unmount → mount
//! opens no second socket and never flaps.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Room } from "../src/room.js";
import { holdRoom, peekRoom, roomKey, sharedRooms } from "../src/shared.js";
import { welcome, world } from "./fakes.js";
import { URL } from "./helpers.js";

let n = 0;
/** Options for a fresh room name (the registry is per process, like per tab). */
function fresh(w: ReturnType<typeof world>) {
  return { room: `shared-${++n}`, url: URL, env: w.env };
}

describe("shared rooms", () => {
  it("keys by deployment, kind and room", () => {
    assert.equal(roomKey({ room: "a", url: URL }), roomKey({ room: "a", url: URL, kind: "rooms" }));
    assert.notEqual(roomKey({ room: "a", url: URL }), roomKey({ room: "a", url: URL, kind: "chat" }));
    assert.notEqual(roomKey({ room: "a", url: URL }), roomKey({ room: "b", url: URL }));
    assert.notEqual(roomKey({ room: "a", url: URL }), roomKey({ room: "a", url: "https://other.example" }));
    assert.notEqual(roomKey({ room: "a" }), roomKey({ room: "a", url: URL }));
  });

  it("peekRoom makes an unstarted, unregistered room: nothing opens while rendering", () => {
    const w = world();
    const before = sharedRooms();
    const r = peekRoom(fresh(w));
    assert.ok(r instanceof Room);
    assert.equal(r.status.state, "idle");
    assert.equal(w.sockets.length, 0);
    assert.equal(sharedRooms(), before);
  });

  it("two holders share one room and one socket; it closes a grace period after the last release", async () => {
    const w = world();
    const opts = fresh(w);
    const key = roomKey(opts);
    const a = holdRoom(key, peekRoom(opts), { timers: w.clock, releaseMs: 1000 });
    const b = holdRoom(key, peekRoom(opts), { timers: w.clock, releaseMs: 1000 });
    assert.equal(b.room, a.room, "the second holder gets the first one's room");
    assert.equal(peekRoom(opts), a.room, "and so does a render");
    assert.equal(w.sockets.length, 1);
    welcome(w.last());
    a.release();
    a.release(); // twice is once
    await w.clock.advance(5_000);
    assert.equal(a.room.status.state, "open", "still held by b");
    b.release();
    await w.clock.advance(999);
    assert.equal(a.room.status.state, "open", "within the grace period");
    await w.clock.advance(1);
    assert.equal(a.room.status.state, "closed");
    assert.equal(w.last().closedByClient?.code, 1000);
    assert.notEqual(peekRoom(opts), a.room, "gone from the registry");
  });

  it("StrictMode's mount → unmount → mount: no second socket, no close", async () => {
    const w = world();
    const opts = fresh(w);
    const key = roomKey(opts);
    const room = peekRoom(opts);
    const first = holdRoom(key, room, { timers: w.clock });
    assert.equal(w.sockets.length, 1);
    first.release(); // the simulated unmount
    const second = holdRoom(key, room, { timers: w.clock }); // the remount, same tick
    assert.equal(second.room, room);
    welcome(w.last());
    await w.clock.advance(60_000);
    assert.equal(w.sockets.length, 1);
    assert.equal(w.last().closedByClient, null, "never closed");
    assert.equal(room.status.state, "open");
    second.release();
    await w.clock.advance(1_000);
    assert.equal(room.status.state, "closed");
  });

  it("a hold after the close starts a new room; a hold of a room closed by hand reopens it", async () => {
    const w = world();
    const opts = fresh(w);
    const key = roomKey(opts);
    const a = holdRoom(key, peekRoom(opts), { timers: w.clock, releaseMs: 10 });
    welcome(w.last());
    a.room.close(); // the app closed it while holding it
    const b = holdRoom(key, peekRoom(opts), { timers: w.clock, releaseMs: 10 });
    assert.equal(b.room, a.room);
    assert.equal(a.room.status.state, "reconnecting", "reopened");
    assert.equal(w.sockets.length, 2);
    a.release();
    b.release();
    await w.clock.advance(10);
    const c = holdRoom(key, peekRoom(opts), { timers: w.clock, releaseMs: 10 });
    assert.notEqual(c.room, a.room);
    assert.equal(w.sockets.length, 3);
    c.release();
    await w.clock.advance(10);
  });
});
