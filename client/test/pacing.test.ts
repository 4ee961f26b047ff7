//! Pacing against a fake room that enforces the real limits (fakeroom.ts):
//! no call pattern gets a user `rate_limited` or 4029, the last presence and
//! the last signal always arrive, durable sends are never starved by
//! ephemeral ones, the client follows the limits its welcome announces, and
//! what the room would refuse is refused locally.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { HomeroomError } from "../src/errors.js";
import type { Json } from "../src/protocol.js";
import { Room } from "../src/room.js";
import { FakeClock, seeded, world, type FakeSocket } from "./fakes.js";
import { FakeRoom, SERVER_LIMITS, type RoomLimits } from "./fakeroom.js";
import { URL } from "./helpers.js";

interface Tab {
  room: Room;
  sockets: FakeSocket[];
  /** The last signal data this tab received, per sender session and topic. */
  signals: Map<string, Json>;
  received: number;
}

/** A fake room and `n` tabs on one clock; `user` names each tab's user. */
function setup(n: number, opts: { user?: (i: number) => string; limits?: RoomLimits; seed?: number } = {}) {
  const clock = new FakeClock();
  const server = new FakeRoom(clock, seeded(opts.seed ?? 99), opts.limits ?? SERVER_LIMITS);
  const tabs: Tab[] = [];
  for (let i = 0; i < n; i++) {
    const user = opts.user?.(i);
    const w = world({ clock, seed: i + 1, onSocket: (s) => server.attach(s, user === undefined ? undefined : () => user) });
    const room = new Room({ room: "r1", url: URL, env: w.env });
    const tab: Tab = { room, sockets: w.sockets, signals: new Map(), received: 0 };
    room.on("signal", (s) => {
      tab.signals.set(`${s.session}\0${s.topic}`, s.data);
      tab.received += 1;
    });
    room.start();
    tabs.push(tab);
  }
  clock.runUntil(clock.t + 1_000);
  for (const t of tabs) assert.equal(t.room.status.state, "open");
  return { clock, server, tabs };
}

/** Calls `fn(i)` every millisecond for `ms` of virtual time (1,000 calls a second). */
function everyMs(clock: FakeClock, ms: number, fn: (i: number) => void): void {
  let i = 0;
  const tick = (): void => {
    fn(i++);
    if (i < ms) clock.setTimeout(tick, 1);
  };
  clock.setTimeout(tick, 0);
}

describe("pacing against the room's real limits", () => {
  it("1,000 setPresence and 1,000 signal calls a second for 10 s, plus publishes: nothing refused, the last ones arrive, every publish acked", async () => {
    const { clock, server, tabs } = setup(2);
    const [a, b] = [tabs[0]!, tabs[1]!];
    const publishes: Array<Promise<number>> = [];
    const sentAt = new Map<number, number>();
    const ackLatency: number[] = [];
    // The room's echo of a publish comes with its ack: timed synchronously on the clock.
    a.room.on("message", (m) => ackLatency.push(clock.t - sentAt.get((m.data as { n: number }).n)!));
    let last = -1;
    everyMs(clock, 10_000, (i) => {
      a.room.setPresence({ x: i, name: "ada" });
      assert.equal(a.room.signal("cursor", { x: i }), true);
      last = i;
      if (i % 250 === 0) {
        sentAt.set(i, clock.t);
        publishes.push(a.room.publish("chat", { n: i }));
      }
    });
    // 10 s of calls, then 2 s for the trailing frames.
    for (let t = 0; t < 12; t++) {
      clock.runUntil(clock.t + 1_000);
      await Promise.resolve();
    }
    assert.equal(last, 9_999);
    assert.deepEqual(server.counters, { ...server.counters, refused: 0, abuseCloses: 0, tooLarge: 0 }, "nothing over the limits");
    assert.equal(a.sockets.length, 1, "never closed, never reconnected");
    // The last presence and the last signal reached the room and the other tab.
    assert.deepEqual(server.presence.get(a.room.session), { x: 9_999, name: "ada" });
    assert.deepEqual(server.signals.get(`${a.room.session}\0cursor`), { x: 9_999 });
    assert.deepEqual(b.room.presence.members.get(a.room.session)?.state, { x: 9_999, name: "ada" });
    assert.deepEqual(b.signals.get(`${a.room.session}\0cursor`), { x: 9_999 });
    // Every publish acked, in order; and a publish during the storm was not held back.
    const seqs = await Promise.all(publishes);
    assert.equal(seqs.length, 40);
    assert.deepEqual(seqs, [...seqs].sort((x, y) => x - y));
    assert.equal(ackLatency.length, 40);
    assert.ok(Math.max(...ackLatency) <= 200, `ack latencies up to ${Math.max(...ackLatency)} ms (a round trip is 40-120 ms)`);
    // It used its budget rather than dropping everything: about 16 frames a second.
    const frames = a.sockets[0]!.sent.filter((t) => !t.includes('"ping"')).length;
    assert.ok(frames >= 150 && frames <= 40 + 16 * 12, `${frames} frames in 12 s`);
    assert.ok(b.received >= 50, `${b.received} cursor updates reached the other tab`);
  });

  it("big writes are paced by the user's byte budget too: 60 publishes of 60 KB, none refused, all acked", async () => {
    const { clock, server, tabs } = setup(2);
    const a = tabs[0]!;
    const pad = "x".repeat(60_000);
    const start = clock.t;
    const publishes = Array.from({ length: 60 }, (_, i) => a.room.publish("chat", { i, pad }));
    let done = false;
    void Promise.all(publishes).then(() => (done = true));
    const limits = SERVER_LIMITS;
    for (let t = 0; t < 30 && !done; t++) {
      clock.runUntil(clock.t + 1_000);
      await Promise.resolve();
    }
    const seqs = await Promise.all(publishes);
    assert.equal(seqs.length, 60);
    assert.equal(server.counters.refused, 0, "nothing refused for the bytes");
    // 3.6 MB at 0.8 of 256 KiB a second, after 0.8 MiB at once: about 14 s, not the 3 s the
    // frame budget alone would allow.
    const bytes = 60 * 60_000;
    const least = ((bytes - 0.8 * limits.user_bytes_burst) / (0.8 * limits.user_bytes_per_sec)) * 1000;
    const sent = a.sockets[0]!.sent.filter((t) => t.includes('"publish"'));
    assert.equal(sent.length, 60, "each written once");
    assert.ok(clock.t - start >= least * 0.9, `${clock.t - start} ms for what takes at least ${Math.round(least)} ms`);
  });

  it("a big upload waiting for its bytes holds back no cursor", async () => {
    const { clock, server, tabs } = setup(2);
    const [a, b] = [tabs[0]!, tabs[1]!];
    const pad = "x".repeat(60_000);
    const publishes = Array.from({ length: 40 }, (_, i) => a.room.publish("chat", { i, pad }));
    const before = b.received;
    everyMs(clock, 5_000, (i) => a.room.signal("cursor", { x: i }));
    clock.runUntil(clock.t + 5_000);
    // The cursor's own pace (a signal per topic every 50 ms) is 100 in 5 s; one that waited
    // behind each write's bytes got about 4 a second.
    const cursors = b.received - before;
    assert.ok(cursors >= 60, `${cursors} cursor updates in 5 s of upload`);
    clock.runUntil(clock.t + 15_000);
    assert.equal((await Promise.all(publishes)).length, 40);
    assert.equal(server.counters.refused, 0);
  });

  it("a backlog of durable sends and a cursor storm take turns: neither starves", async () => {
    const { clock, server, tabs } = setup(2);
    const [a, b] = [tabs[0]!, tabs[1]!];
    const publishes = Array.from({ length: 200 }, (_, i) => a.room.publish("chat", i));
    everyMs(clock, 10_000, (i) => a.room.signal("cursor", { x: i }));
    clock.runUntil(clock.t + 5_000);
    const sent = a.sockets[0]!.frames();
    const [pubs, sigs] = [sent.filter((f) => f.type === "publish").length, sent.filter((f) => f.type === "signal").length];
    assert.ok(sigs >= 30, `signals went out while 200 publishes waited: ${sigs}`);
    assert.ok(pubs >= 50, `publishes kept going during the storm: ${pubs}`);
    assert.ok(Math.abs(pubs - 40 - sigs) <= 2, `after the burst they alternate: ${pubs} publishes, ${sigs} signals`);
    clock.runUntil(clock.t + 20_000);
    assert.equal((await Promise.all(publishes)).length, 200);
    assert.deepEqual(b.signals.get(`${a.room.session}\0cursor`), { x: 9_999 });
    assert.equal(server.counters.refused, 0);
  });

  it("tabs of one user share the user's budget: three tabs flooding at once are never refused", async () => {
    const { clock, server, tabs } = setup(3, { user: () => "alice" });
    for (const t of tabs) {
      const pace = (t.room as unknown as { sender: { bucket: { current: { perSec: number; burst: number } } } }).sender.bucket.current;
      assert.ok(Math.abs(pace.perSec - (0.8 * 40) / 3) < 1e-9, `a third of the user's rate each: ${pace.perSec}`);
      assert.equal(pace.burst, Math.floor((0.8 * 100) / 3), "and of the user's burst");
    }
    everyMs(clock, 5_000, (i) => {
      for (const t of tabs) {
        t.room.setPresence({ i });
        t.room.signal("cursor", i);
        if (i % 100 === 0) void t.room.publish("chat", i);
      }
    });
    clock.runUntil(clock.t + 8_000);
    assert.equal(server.counters.refused, 0);
    assert.equal(server.counters.abuseCloses, 0);
    for (const t of tabs) assert.deepEqual(server.presence.get(t.room.session), { i: 4_999 });
  });

  it("follows the limits the welcome announces (here 5/s, burst 10)", async () => {
    const limits = { ...SERVER_LIMITS, rate: 5, burst: 10 };
    const { clock, server, tabs } = setup(1, { limits });
    const a = tabs[0]!;
    for (let i = 0; i < 100; i++) void a.room.publish("chat", i);
    clock.runUntil(clock.t + 10_000);
    const n = a.sockets[0]!.ofType("publish").length;
    // Burst 8 (80% of 10) after the get_state, then 4/s.
    assert.ok(n >= 44 && n <= 49, `${n} publishes in 10 s`);
    assert.equal(server.counters.refused, 0);
  });
});

describe("local refusals by the room's limits", () => {
  it("refuses a frame over max_frame and presence over presence_max with a typed error, and keeps the socket", async () => {
    const { clock, server, tabs } = setup(1, { limits: { ...SERVER_LIMITS, max_frame: 2_000, presence_max: 100 } });
    const a = tabs[0]!;
    assert.equal(a.room.limits.max_frame, 2_000);
    await assert.rejects(a.room.publish("chat", "x".repeat(2_000)), (e: unknown) => e instanceof HomeroomError && e.code === "too_large");
    await assert.rejects(a.room.set("k", "x".repeat(2_000)), { code: "too_large" });
    assert.throws(() => a.room.signal("cursor", "x".repeat(2_000)), { code: "too_large" });
    assert.throws(() => a.room.setPresence({ bio: "x".repeat(100) }), { code: "too_large" });
    assert.throws(() => a.room.setPresence([] as unknown as Record<string, Json>), { code: "invalid" });
    let deep: Json = 1;
    for (let i = 0; i < 32; i++) deep = [deep];
    assert.equal(a.room.signal("deep", deep), true, "32 deep: what the room takes");
    await assert.rejects(a.room.publish("chat", [deep]), { code: "invalid" });
    assert.throws(() => a.room.setPresence({ d: deep }), { code: "invalid" });
    // Right under the limits: accepted.
    a.room.setPresence({ bio: "x".repeat(80) });
    const fits = a.room.publish("chat", "x".repeat(1_900));
    clock.runUntil(clock.t + 1_000);
    assert.ok((await fits) > 0);
    assert.deepEqual(server.counters, { ...server.counters, refused: 0, tooLarge: 0 });
    assert.equal(a.room.status.state, "open");
    assert.equal(a.sockets.length, 1);
    assert.deepEqual(server.presence.get(a.room.session), { bio: "x".repeat(80) });
  });
});
