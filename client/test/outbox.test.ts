//! Durable sends: ids, acks, CAS conflicts, resend of unacked publishes and
//! sets after a reconnect (and never of signals), pacing under the rate limit.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { HomeroomError } from "../src/errors.js";
import { welcome, world } from "./fakes.js";
import { connected, room } from "./helpers.js";

describe("publish and set", () => {
  it("publish resolves with the seq of its ack", async () => {
    const { w, r } = await connected();
    const p = r.publish("chat", { text: "hi" });
    const [frame] = w.last().ofType("publish");
    assert.deepEqual({ ...frame, id: undefined }, { type: "publish", id: undefined, topic: "chat", data: { text: "hi" } });
    w.last().receive({ type: "ack", id: frame!.id, seq: 7 });
    assert.equal(await p, 7);
    assert.equal(r.status.pending, 0);
  });

  it("set sends if_version and resolves with the version", async () => {
    const { w, r } = await connected();
    const p = r.set("bid", { amount: 5 }, { ifVersion: 0 });
    const [frame] = w.last().ofType("set");
    assert.equal(frame!.if_version, 0);
    assert.equal(frame!.key, "bid");
    w.last().receive({ type: "ack", id: frame!.id, seq: 3 });
    assert.equal(await p, 3);
    r.set("free", 1);
    assert.equal("if_version" in w.last().ofType("set")[1]!, false);
  });

  it("a stale CAS rejects with conflict and the current version", async () => {
    const { w, r } = await connected();
    const p = r.set("bid", 10, { ifVersion: 4 });
    const [frame] = w.last().ofType("set");
    w.last().receive({ type: "error", code: "conflict", id: frame!.id, message: "version mismatch", version: 9 });
    await assert.rejects(p, (e: unknown) => e instanceof HomeroomError && e.code === "conflict" && e.version === 9);
  });

  it("an error answering a send rejects it without an error event; others are events", async () => {
    const { w, r } = await connected();
    const events: string[] = [];
    r.on("error", (e) => events.push(e.code));
    const p = r.publish("chat", "x");
    w.last().receive({ type: "error", code: "invalid", id: w.last().ofType("publish")[0]!.id, message: "bad" });
    await assert.rejects(p, { code: "invalid" });
    w.last().receive({ type: "error", code: "bad_frame", message: "binary" });
    assert.deepEqual(events, ["bad_frame"]);
  });

  it("client ids are unique, carry a random part, and differ across reloads of one session", async () => {
    const a = await connected({ seed: 1, connect: { session: "s-same-session" } });
    const b = await connected({ seed: 2, connect: { session: "s-same-session" } });
    for (let i = 0; i < 50; i++) {
      a.r.publish("chat", i);
      b.r.publish("chat", i);
    }
    await a.w.clock.advance(5_000);
    await b.w.clock.advance(5_000);
    const ids = [...a.w.last().ofType("publish"), ...b.w.last().ofType("publish")].map((f) => f.id as string);
    assert.equal(new Set(ids).size, 100);
    for (const id of ids) assert.match(id, /^[0-9a-z]{8}-[0-9a-z]+$/);
  });

  it("refuses a frame over 64 KiB before sending it", async () => {
    const { w, r } = await connected();
    await assert.rejects(r.publish("chat", "x".repeat(70_000)), { code: "too_large" });
    assert.equal(w.last().ofType("publish").length, 0);
  });

  it("refuses reserved or bad topics", async () => {
    const { r } = await connected();
    await assert.rejects(r.publish("$state", 1), { code: "invalid" });
    await assert.rejects(r.publish("", 1), { code: "invalid" });
    assert.equal(r.signal("$x", 1), false);
  });
});

describe("resend after reconnect", () => {
  it("resends an unacked publish with the same id; it resolves once", async () => {
    const { w, r } = await connected();
    let resolved = 0;
    const p = r.publish("chat", "hello").then((seq) => (resolved++, seq));
    const id = w.last().ofType("publish")[0]!.id;
    w.last().serverClose(1006); // the ack never came
    await w.clock.advance(2_000);
    const again = w.last();
    welcome(again, { seq: 1, resumed: true, missed: 0 });
    const resent = again.ofType("publish");
    assert.equal(resent.length, 1);
    assert.equal(resent[0]!.id, id, "same id: the room deduplicates");
    again.receive({ type: "ack", id, seq: 1 }); // the original ack
    again.receive({ type: "ack", id, seq: 1 }); // a stray duplicate changes nothing
    assert.equal(await p, 1);
    assert.equal(resolved, 1);
  });

  it("keeps publishes and sets made while disconnected and sends them in order", async () => {
    const { w, r } = await connected();
    w.last().serverClose(1006);
    const a = r.publish("chat", "one");
    const b = r.set("k", 2, { ifVersion: 0 });
    const c = r.publish("chat", "three");
    assert.equal(r.status.pending, 3);
    await w.clock.advance(2_000);
    const s = w.last();
    assert.equal(s.sent.length, 0, "nothing is written before the welcome");
    welcome(s, { resumed: true });
    const written = s.frames().filter((f) => f.type === "publish" || f.type === "set");
    assert.deepEqual(
      written.map((f) => f.type === "set" ? `set ${f.key}` : `publish ${f.data}`),
      ["publish one", "set k", "publish three"],
    );
    written.forEach((f, i) => s.receive({ type: "ack", id: f.id, seq: i + 1 }));
    assert.deepEqual(await Promise.all([a, b, c]), [1, 2, 3]);
  });

  it("never queues signals: dropped while disconnected, not sent after reconnect", async () => {
    const { w, r } = await connected();
    assert.equal(r.signal("cursor", { x: 1 }), true);
    assert.equal(w.last().ofType("signal").length, 1);
    w.last().serverClose(1006);
    assert.equal(r.signal("cursor", { x: 2 }), false);
    await w.clock.advance(2_000);
    welcome(w.last(), { resumed: true });
    assert.equal(w.last().ofType("signal").length, 0);
    assert.equal(r.signal("cursor", { x: 3 }), true);
    assert.deepEqual(w.last().ofType("signal").map((f) => f.data), [{ x: 3 }]);
  });

  it("paces a long backlog under the room's rate limit (never 4029)", async () => {
    const { w, r } = await connected();
    w.last().serverClose(1006);
    for (let i = 0; i < 100; i++) void r.publish("chat", i);
    await w.clock.advance(2_000);
    const s = w.last();
    welcome(s, { resumed: true });
    const count = () => s.ofType("publish").length;
    assert.equal(count(), 40, "a burst of 40 (the room allows 50)");
    await w.clock.advance(1_000);
    assert.ok(count() <= 40 + 17, `${count()} after 1 s`);
    await w.clock.advance(3_000);
    assert.equal(count(), 100, "the rest at 16/s");
    assert.deepEqual(s.ofType("publish").map((f) => f.data), [...Array(100).keys()]);
  });

  it("after a rate_limited error, writes the unacked sends again 1-2 s later", async () => {
    const { w, r } = await connected();
    void r.publish("chat", "a");
    const s = w.last();
    s.receive({ type: "error", code: "rate_limited", message: "slow down" });
    await w.clock.advance(999);
    assert.equal(s.ofType("publish").length, 1);
    await w.clock.advance(1_001);
    assert.equal(s.ofType("publish").length, 2);
    assert.equal(s.ofType("publish")[0]!.id, s.ofType("publish")[1]!.id);
  });

  it("close() rejects what is still unacked", async () => {
    const { r } = await connected();
    const p = r.publish("chat", "bye");
    r.close();
    await assert.rejects(p, { code: "closed" });
  });

  it("queues sends made before the first welcome", async () => {
    const w = world();
    const r = room(w);
    const p = r.publish("chat", "early");
    await w.clock.advance(0);
    welcome(w.last());
    assert.deepEqual(w.last().frames().map((f) => f.type), ["get_state", "publish"], "the state first, then the queued send");
    const [f] = w.last().ofType("publish");
    w.last().receive({ type: "ack", id: f!.id, seq: 1 });
    assert.equal(await p, 1);
  });
});
