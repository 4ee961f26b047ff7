//! Flow control: every `mark` the server sends is echoed at once, verbatim,
//! straight to the socket (top level or inside a batch, welcomed or not),
//! never paced by the outbox and never an event.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { RoomEvents } from "../src/room.js";
import { message, world } from "./fakes.js";
import { connected, room } from "./helpers.js";

const EVENTS: Array<keyof RoomEvents> = ["message", "state", "signal", "presence", "summary", "status", "resync", "error"];

describe("flow control marks", () => {
  it("echoes a top-level mark at once, verbatim", async () => {
    const { w } = await connected();
    const s = w.last();
    const before = s.sent.length;
    const mark = 'c-7f3a:262144:"q"\\é';
    s.receive({ type: "mark", mark });
    assert.deepEqual(s.sent.slice(before), [JSON.stringify({ type: "mark", mark })]);
    assert.deepEqual(s.ofType("mark"), [{ type: "mark", mark }]);
  });

  it("echoes marks inside a batch in order, applies the frames around them, and emits nothing for them", async () => {
    const { w, r } = await connected();
    const s = w.last();
    const seen: string[] = [];
    for (const e of EVENTS) r.on(e, () => seen.push(e));
    s.receive({ type: "batch", frames: [message(1), { type: "mark", mark: "m-1" }, message(2), { type: "mark", mark: "m-2" }] });
    assert.deepEqual(s.ofType("mark").map((f) => f.mark), ["m-1", "m-2"]);
    assert.equal(r.seq, 2);
    assert.deepEqual(seen, ["message", "status", "message", "status"], "the two messages only");
    seen.length = 0;
    s.receive({ type: "mark", mark: "m-3" });
    assert.deepEqual(seen, []);
  });

  it("is not paced: echoes with the outbox's rate bucket empty and takes no token from it", async () => {
    /** 100 publishes (more than the burst) and `marks` marks: publishes written at 0, 1 s, 6 s. */
    const run = async (marks: number): Promise<number[]> => {
      const { w, r } = await connected();
      const s = w.last();
      for (let i = 0; i < 100; i++) void r.publish("chat", i);
      const counts = [s.ofType("publish").length];
      assert.ok(counts[0]! < 100, "the bucket is empty: publishes wait");
      for (let i = 0; i < marks; i++) {
        s.receive({ type: "mark", mark: `m${i}` });
        assert.equal(s.ofType("mark").length, i + 1, "echoed in the same tick");
        assert.equal(s.ofType("publish").length, counts[0], "and nothing else went out with it");
      }
      await w.clock.advance(1_000);
      counts.push(s.ofType("publish").length);
      for (let i = 0; i < marks; i++) s.receive({ type: "batch", frames: [{ type: "mark", mark: `b${i}` }] });
      assert.equal(s.ofType("mark").length, 2 * marks);
      await w.clock.advance(5_000);
      counts.push(s.ofType("publish").length);
      return counts;
    };
    const quiet = await run(0);
    const marked = await run(30);
    assert.deepEqual(marked, quiet, "the same publishes at the same times, with or without 60 echoes");
    assert.equal(quiet[2], 100);
  });

  it("echoes a mark that comes before the welcome when the socket is open, and drops one on a closed socket", async () => {
    const w = world();
    const r = room(w);
    await w.clock.advance(0);
    const s = w.last();
    s.open(); // open, no welcome yet
    s.receive({ type: "mark", mark: "early" });
    assert.deepEqual(s.ofType("mark"), [{ type: "mark", mark: "early" }]);
    assert.equal(r.status.state, "connecting");
    s.readyState = 2; // closing: the echo would throw in a browser
    assert.doesNotThrow(() => s.receive({ type: "mark", mark: "late" }));
    assert.equal(s.ofType("mark").length, 1);
  });

  it("ignores a mark that is not a string", async () => {
    const { w } = await connected();
    w.last().receive({ type: "mark", mark: 7 });
    w.last().receive({ type: "mark" });
    assert.equal(w.last().ofType("mark").length, 0);
  });
});
