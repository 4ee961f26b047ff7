//! The close codes of a room defending itself: 4013 (fell behind), 4401
//! (token refused), 4403 (user refused), 4409 (session of another user) and
//! 4429 (too many connections), on the fake clock.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { Status } from "../src/room.js";
import { SESSION_KEY } from "../src/session.js";
import { message, welcome, world, type World } from "./fakes.js";
import { connected, room } from "./helpers.js";

/** A getToken that hands out t-1, t-2, ... and records when it was called. */
function tokens(w: World) {
  const calls: number[] = [];
  const getToken = async (): Promise<string> => {
    calls.push(w.clock.t);
    return `t-${calls.length}`;
  };
  return { calls, getToken };
}

/** Waits until the retry is due (and the next socket is made). */
async function untilRetry(w: World, status: Status): Promise<void> {
  assert.notEqual(status.retryAt, null, "a retry is scheduled");
  await w.clock.advance(status.retryAt! - w.clock.t);
}

describe("4013 backlog", () => {
  it("reconnects within the 1 s prompt window and resumes with since/epoch", async () => {
    const { w, r } = await connected({ welcome: { seq: 3, epoch: "e-b" } });
    w.last().receive(message(4));
    w.last().serverClose(4013, "backlog");
    assert.equal(r.status.state, "reconnecting");
    assert.equal(r.status.why, "close 4013");
    assert.deepEqual(r.status.lastClose, { code: 4013, reason: "backlog" });
    const wait = r.status.retryAt! - w.clock.t;
    assert.ok(wait >= 0 && wait < 1_000, `retry in ${wait} ms`);
    await w.clock.advance(1_000);
    assert.equal(w.sockets.length, 2);
    assert.equal(w.last().params.get("since"), "4");
    assert.equal(w.last().params.get("epoch"), "e-b");
    welcome(w.last(), { seq: 6, epoch: "e-b", resumed: true, missed: 2 });
    w.last().receive(message(5));
    w.last().receive(message(6));
    assert.equal(r.seq, 6);
  });

  it("falls back to backoff when it repeats right after the welcome", async () => {
    const { w, r } = await connected();
    w.last().serverClose(4013, "backlog");
    await untilRetry(w, r.status);
    welcome(w.last(), { resumed: true });
    w.last().serverClose(4013, "backlog");
    assert.equal(r.status.attempt, 2, "a short connection does not reset the count");
    assert.ok(r.status.retryAt! - w.clock.t < 4_000, "within the backoff window of attempt 1");
  });
});

describe("4401 token refused", () => {
  it("with getToken: fetches a new token before the next dial and reconnects promptly with it", async () => {
    const w = world();
    const t = tokens(w);
    const r = room(w, { getToken: t.getToken });
    await w.clock.advance(0);
    assert.equal(w.last().params.get("token"), "t-1");
    welcome(w.last());
    await w.clock.advance(60_000);
    w.last().serverClose(4401, "token_expired");
    assert.deepEqual(r.status.lastClose, { code: 4401, reason: "token_expired" });
    const wait = r.status.retryAt! - w.clock.t;
    assert.ok(wait >= 0 && wait < 1_000, `retry in ${wait} ms`);
    assert.equal(t.calls.length, 1, "no token fetched before the retry is due");
    await w.clock.advance(1_000);
    assert.equal(t.calls.length, 2);
    assert.equal(w.sockets.length, 2);
    assert.ok(t.calls[1]! <= w.last().createdAt, "the token came before the dial");
    assert.equal(w.last().params.get("token"), "t-2");
    welcome(w.last());
    assert.equal(r.status.state, "open");
  });

  it("stops for good after 3 refusals in a row: why auth, pending sends rejected with auth, no dial after", async () => {
    const w = world();
    const t = tokens(w);
    const r = room(w, { getToken: t.getToken });
    await w.clock.advance(0);
    welcome(w.last());
    w.last().receive({ type: "state", seq: 0, state: {} });
    const pending = r.publish("chat", "hi");
    const rejected = assert.rejects(pending, { name: "HomeroomError", code: "auth" });
    w.last().serverClose(4401, "token_expired");
    for (const reason of ["token_bad_signature", "token_bad_signature"]) {
      assert.equal(r.status.state, "reconnecting");
      assert.ok(r.status.retryAt! - w.clock.t < 1_000, "each refusal in the streak: prompt");
      await untilRetry(w, r.status);
      assert.equal(w.last().params.get("token"), `t-${t.calls.length}`, "a new token on every dial");
      w.last().open();
      w.last().serverClose(4401, reason); // refused before any welcome
    }
    assert.equal(t.calls.length, 3);
    assert.equal(w.sockets.length, 3);
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "auth");
    assert.equal(r.status.retryAt, null);
    await rejected;
    await assert.rejects(r.whenOpen(), { code: "auth" });
    await w.clock.advance(10 * 60_000);
    assert.equal(w.sockets.length, 3, "no dial after the stop");
    assert.equal(t.calls.length, 3);
    assert.equal(w.clock.pending, 0, "no timers left behind");
  });

  it("a welcome in between starts the count over", async () => {
    const w = world();
    const t = tokens(w);
    const r = room(w, { getToken: t.getToken });
    await w.clock.advance(0);
    welcome(w.last());
    for (let i = 0; i < 5; i++) {
      w.last().serverClose(4401, "token_expired");
      assert.equal(r.status.state, "reconnecting", `refusal ${i + 1}`);
      await untilRetry(w, r.status);
      welcome(w.last());
      await w.clock.advance(10_000); // a healthy connection each time
    }
    assert.equal(r.status.state, "open");
    assert.equal(t.calls.length, 6);
  });

  it("maxAuthRefusals sets the limit", async () => {
    const w = world();
    const t = tokens(w);
    const r = room(w, { getToken: t.getToken, maxAuthRefusals: 1 });
    await w.clock.advance(0);
    welcome(w.last());
    w.last().serverClose(4401, "token_wrong_room");
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "auth");
    assert.throws(() => room(world(), { maxAuthRefusals: 0 }), TypeError);
  });

  it("without getToken: stops at once with why auth", async () => {
    const { w, r } = await connected({ connect: { token: "t-fixed" } });
    const pending = r.publish("chat", "hi");
    w.last().serverClose(4401, "token_expired");
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "auth");
    await assert.rejects(pending, (e: unknown) => e instanceof Error && (e as { code?: string }).code === "auth" && /token_expired/.test(e.message));
    await w.clock.advance(10 * 60_000);
    assert.equal(w.sockets.length, 1);
  });
});

describe("4403 refused user", () => {
  for (const reason of ["kicked", "blocked", "room_rules"]) {
    it(`${reason}: never reconnects, stops with why ${reason}, pending sends rejected with it`, async () => {
      const { w, r } = await connected();
      const pending = r.publish("chat", "hi");
      const statuses: Status[] = [];
      r.on("status", (s) => statuses.push(s));
      w.last().serverClose(4403, reason);
      await assert.rejects(pending, { name: "HomeroomError", code: reason });
      assert.equal(r.status.state, "closed");
      assert.equal(r.status.why, reason);
      assert.deepEqual(r.status.lastClose, { code: 4403, reason });
      assert.deepEqual(statuses.map((s) => [s.state, s.why]), [["closed", reason]]);
      await w.clock.advance(10 * 60_000);
      assert.equal(w.sockets.length, 1, "no dial afterwards");
      assert.equal(w.clock.pending, 0);
      await assert.rejects(r.publish("chat", "again"), { code: "closed" });
    });
  }

  it("stops even with getToken, and with why forbidden when the reason is empty", async () => {
    const w = world();
    const t = tokens(w);
    const r = room(w, { getToken: t.getToken });
    await w.clock.advance(0);
    w.last().open();
    w.last().serverClose(4403);
    assert.equal(r.status.why, "forbidden");
    await w.clock.advance(10 * 60_000);
    assert.equal(w.sockets.length, 1);
    assert.equal(t.calls.length, 1);
  });
});

describe("4409 session taken", () => {
  it("picks a fresh session, stores it, and resumes promptly with the outbox and presence kept", async () => {
    const { w, r } = await connected({ welcome: { seq: 2, epoch: "e-s" }, connect: { presence: { name: "ann" } } });
    const old = r.session;
    assert.equal(w.session.getItem(SESSION_KEY), old);
    const first = w.last();
    first.receive(message(3));
    const pending = r.publish("chat", "hi");
    const id = first.ofType("publish")[0]!.id;
    const statuses: Status[] = [];
    r.on("status", (s) => statuses.push(s));

    first.serverClose(4409, "session_taken");
    assert.notEqual(r.session, old);
    assert.match(r.session, /^s-[0-9a-z]{20}$/);
    assert.equal(w.session.getItem(SESSION_KEY), r.session, "a reload keeps the new one");
    assert.equal(statuses.length, 1, "a status change");
    assert.equal(statuses[0]!.session, r.session);
    assert.equal(statuses[0]!.state, "reconnecting");
    assert.equal(r.status.pending, 1);
    const wait = r.status.retryAt! - w.clock.t;
    assert.ok(wait >= 0 && wait < 1_000, `retry in ${wait} ms`);

    await w.clock.advance(1_000);
    const s = w.last();
    assert.equal(w.sockets.length, 2);
    assert.equal(s.params.get("session"), r.session);
    assert.equal(s.params.get("since"), "3", "the resume cursor is room-wide: kept");
    assert.equal(s.params.get("epoch"), "e-s");
    welcome(s, { seq: 3, epoch: "e-s", resumed: true });
    assert.equal(s.ofType("get_state").length, 0);
    assert.deepEqual(s.ofType("presence"), [{ type: "presence", state: { name: "ann" } }], "this tab's presence, under the new session");
    assert.deepEqual(r.presence.members.get(r.session)?.state, { name: "ann" });
    const resent = s.ofType("publish");
    assert.deepEqual(resent.map((f) => [f.id, f.data]), [[id, "hi"]], "the pending publish, same id");
    s.receive({ type: "ack", id, seq: 4 });
    assert.equal(await pending, 4);
    assert.equal(r.status.pending, 0);
    assert.equal(r.status.session, r.session);
  });

  it("with a session given by the app: switches too, and leaves sessionStorage alone", async () => {
    const { w, r } = await connected({ connect: { session: "s-given-by-app" } });
    w.last().serverClose(4409, "session_taken");
    assert.notEqual(r.session, "s-given-by-app");
    assert.equal(w.session.getItem(SESSION_KEY), null);
    await untilRetry(w, r.status);
    assert.equal(w.last().params.get("session"), r.session);
  });

  it("stops with why session_taken when it repeats 3 times without a welcome", async () => {
    const { w, r } = await connected();
    const pending = r.publish("chat", "hi");
    const rejected = assert.rejects(pending, { code: "session_taken" });
    const used = [r.session];
    w.last().serverClose(4409, "session_taken");
    for (let i = 0; i < 2; i++) {
      assert.ok(r.status.retryAt! - w.clock.t < 1_000);
      await untilRetry(w, r.status);
      used.push(w.last().params.get("session")!);
      w.last().open();
      w.last().serverClose(4409, "session_taken");
    }
    assert.equal(new Set(used).size, 3, "a fresh session on every try");
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "session_taken");
    await rejected;
    await w.clock.advance(10 * 60_000);
    assert.equal(w.sockets.length, 3);
  });

  it("a welcome in between starts the loop guard over", async () => {
    const { w, r } = await connected();
    for (let i = 0; i < 4; i++) {
      w.last().serverClose(4409, "session_taken");
      assert.equal(r.status.state, "reconnecting");
      await untilRetry(w, r.status);
      welcome(w.last());
      await w.clock.advance(10_000);
    }
    assert.equal(r.status.state, "open");
  });
});

describe("4429 too many connections", () => {
  it("waits 30-60 s, like 4029", async () => {
    const { w, r } = await connected();
    w.last().serverClose(4429, "too_many_connections");
    const wait = r.status.retryAt! - w.clock.t;
    assert.ok(wait >= 30_000 && wait < 60_000, `${wait}`);
    assert.equal(r.status.state, "reconnecting");
    await w.clock.advance(29_999);
    assert.equal(w.sockets.length, 1);
    await w.clock.advance(30_001);
    assert.equal(w.sockets.length, 2);
    assert.equal(w.last().params.get("session"), r.session, "same session");
  });

  it("stays long when it repeats", async () => {
    const { w, r } = await connected();
    for (let i = 0; i < 3; i++) {
      w.last().serverClose(4429, "too_many_connections");
      const wait = r.status.retryAt! - w.clock.t;
      assert.ok(wait >= 30_000 && wait < 60_000, `${wait}`);
      await untilRetry(w, r.status);
      w.last().open();
    }
  });
});

describe("a refusal whose close event comes late", () => {
  it("a socket the server is closing at the connect timeout is waited for, not retried as a timeout", async () => {
    // Locally workerd holds a refused socket's TCP open for about 12 s, and a WebSocket reports
    // the close (its code and reason) only when the TCP connection ends; its readyState says
    // CLOSING meanwhile. The client waits for the reason instead of retrying a refusal forever.
    const w = world();
    const r = room(w, { kind: "poll", connectTimeoutMs: 10_000 });
    await w.clock.advance(0);
    const s = w.last();
    s.readyState = 2; // the server accepted, then sent its close frame at once
    await w.clock.advance(12_000);
    assert.equal(w.sockets.length, 1, "no second socket: the first is still closing");
    assert.notEqual(r.status.why, "timeout");
    s.serverClose(4403, "members_only");
    assert.equal(r.status.state, "closed");
    assert.equal(r.status.why, "members_only");
  });

  it("a socket that never opens nor closes is still a timeout", async () => {
    const w = world();
    const r = room(w, { connectTimeoutMs: 10_000 });
    await w.clock.advance(10_001);
    assert.equal(r.status.why, "timeout");
  });
});
