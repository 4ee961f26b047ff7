//! The tab's session id (sessionStorage) and token expiry.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { tokenExpired } from "../src/room.js";
import { SESSION_KEY } from "../src/session.js";
import { world } from "./fakes.js";
import { room } from "./helpers.js";

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
});
