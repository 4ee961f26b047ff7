//! The tab's session id (sessionStorage) and token expiry.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { LocksLike } from "../src/env.js";
import { tokenExpired } from "../src/room.js";
import { SESSION_KEY } from "../src/session.js";
import { world } from "./fakes.js";
import { room } from "./helpers.js";

/** An origin's Web Locks (`held`), seen from one tab (each tab its own object, as each page has
 *  its own `navigator.locks`). */
function tabLocks(held: Set<string>): LocksLike {
  return {
    request(name, _options, callback) {
      if (held.has(name)) return Promise.resolve(callback(null));
      held.add(name);
      return Promise.resolve(callback({ name }));
    },
  };
}

describe("session", () => {
  it("makes a session once per tab and reuses it on reload", async () => {
    const w = world();
    const a = room(w);
    assert.match(a.session, /^[A-Za-z0-9_-]{8,64}$/);
    assert.equal(w.session.getItem(SESSION_KEY), a.session);
    a.close();
    const b = room(w); // same tab, reloaded
    assert.equal(b.session, a.session);
    await w.clock.advance(0);
    assert.equal(w.last().params.get("session"), a.session);
  });

  it("another tab (its own sessionStorage) gets another session", () => {
    assert.notEqual(room(world({ seed: 1 })).session, room(world({ seed: 2 })).session);
  });

  it("replaces a malformed stored session", () => {
    const w = world();
    w.session.setItem(SESSION_KEY, "bad session!");
    const r = room(w);
    assert.notEqual(r.session, "bad session!");
    assert.equal(w.session.getItem(SESSION_KEY), r.session);
  });

  it("validates a given session", () => {
    assert.throws(() => room(world(), { session: "short" }), TypeError);
    assert.equal(room(world(), { session: "s-given-ok" }).session, "s-given-ok");
  });

  it("works without storage", () => {
    const w = world();
    const r = room(w, { env: { sessionStorage: null } });
    assert.match(r.session, /^s-[0-9a-z]{20}$/);
  });
});

describe("token expiry", () => {
  const tok = (payload: object) => Buffer.from(JSON.stringify(payload)).toString("base64url") + ".c2ln";
  it("reads exp from a homeroom token", () => {
    const now = 1_760_000_000_000;
    assert.equal(tokenExpired(tok({ room: "r", sub: "u", exp: now / 1000 + 3600 }), now), false);
    assert.equal(tokenExpired(tok({ room: "r", sub: "u", exp: now / 1000 + 10 }), now), true);
    assert.equal(tokenExpired(tok({ room: "r", sub: "u", exp: now / 1000 - 1 }), now), true);
    assert.equal(tokenExpired("not-a-token", now), false);
    assert.equal(tokenExpired(undefined, now), false);
  });

  it("a duplicated tab (sessionStorage copied) takes a session of its own, and the first keeps its socket", async () => {
    // Without a claim both tabs connected as one session and the room closed the first 4001
    // (superseded): it stopped for good.
    const held = new Set<string>();
    const first = world({ seed: 1 });
    const a = room(first, { env: { ...first.env, locks: tabLocks(held) } });
    await first.clock.advance(0);
    const dup = world({ seed: 2 });
    dup.session.setItem(SESSION_KEY, first.session.getItem(SESSION_KEY)!);
    const b = room(dup, { env: { ...dup.env, locks: tabLocks(held) } });
    await dup.clock.advance(200); // a held lock is asked again 150 ms later (a reload's old page)
    assert.equal(first.last().params.get("session"), a.session);
    assert.notEqual(b.session, a.session, "the duplicate's own session");
    assert.equal(dup.last().params.get("session"), b.session);
    assert.equal(dup.session.getItem(SESSION_KEY), b.session, "kept for the duplicate's reloads");
    assert.equal(first.session.getItem(SESSION_KEY), a.session);
    // A reload: the duplicate's page (and its lock) gone, the first tab's lock still held.
    const reloaded = new Set(held);
    reloaded.delete(`homeroom.session.${b.session}`);
    const c = room(dup, { room: "r2", env: { ...dup.env, locks: tabLocks(reloaded) } });
    await dup.clock.advance(0);
    assert.equal(c.session, b.session, "a reload of the duplicate finds its own session");
  });

  it("two Rooms of one page for the same room get two sessions; for two rooms, the tab's one", async () => {
    const w = world();
    const env = { ...w.env, locks: tabLocks(new Set()) };
    const a = room(w, { env });
    const other = room(w, { room: "r2", env });
    const again = room(w, { env });
    await w.clock.advance(0);
    assert.equal(other.session, a.session, "another room: the tab's session");
    assert.notEqual(again.session, a.session, "the same room again: a session of its own");
    assert.equal(w.session.getItem(SESSION_KEY), a.session, "the tab's session stays stored");
    again.close();
    const later = room(w, { env });
    await w.clock.advance(0);
    assert.notEqual(later.session, a.session, "while the first still has the room");
    a.close();
    const last = room(w, { env });
    await w.clock.advance(0);
    assert.equal(last.session, a.session, "once it closed, the tab's session again");
  });

  it("a Room closed before its claim settled holds nothing: the next one keeps the tab's session", async () => {
    // React's StrictMode starts, closes and starts again at once. The claim, settling after the
    // close, kept the room for the closed Room, and every later Room took a session of its own.
    const w = world();
    const env = { ...w.env, locks: tabLocks(new Set()) };
    const first = room(w, { env });
    first.close();
    const second = room(w, { env });
    await w.clock.advance(0);
    assert.equal(second.session, first.session);
    assert.equal(w.last().params.get("session"), first.session);
  });

  it("a reload whose old page still holds the lock for a moment keeps its session", async () => {
    const held = new Set<string>();
    const w = world();
    const a = room(w, { env: { ...w.env, locks: tabLocks(held) } });
    await w.clock.advance(0);
    // The reloaded page asks while the old one's lock is still held, which goes 100 ms later.
    const reloaded = world({ clock: w.clock });
    reloaded.session.setItem(SESSION_KEY, a.session);
    const b = room(reloaded, { env: { ...reloaded.env, locks: tabLocks(held) } });
    await w.clock.advance(100);
    held.clear();
    await w.clock.advance(100);
    assert.equal(b.session, a.session);
    assert.equal(reloaded.last().params.get("session"), a.session);
  });

  it("two Rooms of a duplicated tab for one room get two sessions, neither the first tab's", async () => {
    const held = new Set<string>();
    const first = world({ seed: 1 });
    const a = room(first, { env: { ...first.env, locks: tabLocks(held) } });
    await first.clock.advance(0);
    const dup = world({ seed: 2 });
    dup.session.setItem(SESSION_KEY, a.session);
    const env = { ...dup.env, locks: tabLocks(held) };
    const b = room(dup, { env });
    const c = room(dup, { env });
    await dup.clock.advance(200);
    assert.notEqual(b.session, a.session);
    assert.notEqual(c.session, a.session);
    assert.notEqual(b.session, c.session, "not one session for both (the room would close one 4001)");
  });
});
