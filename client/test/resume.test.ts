//! Resume: since/epoch on reconnect, replay, resync, the initial state load,
//! and gap detection (a skipped seq reconnects with resume, never applies).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { MessageEvent, ResyncEvent } from "../src/room.js";
import { message, stateMessage, welcome, world } from "./fakes.js";
import { connected, room } from "./helpers.js";

describe("first connect", () => {
  it("connects without since, asks for the state and loads it", async () => {
    const w = world();
    const r = room(w);
    const resyncs: ResyncEvent[] = [];
    r.on("resync", (e) => resyncs.push(e));
    await w.clock.advance(0);
    const s = w.last();
    assert.equal(s.params.get("since"), null);
    assert.equal(s.params.get("epoch"), null);
    welcome(s, { seq: 41, epoch: "e-a" });
    assert.deepEqual(s.ofType("get_state"), [{ type: "get_state" }]);
    s.receive({ type: "state", seq: 41, state: { bid: { value: 5, version: 40 } } });
    assert.deepEqual(r.state.get("bid"), { value: 5, version: 40 });
    assert.deepEqual(resyncs, [{ reason: "initial", seq: 41 }]);
    s.receive(stateMessage(42, "bid", 6));
    assert.deepEqual(r.state.get("bid"), { value: 6, version: 42 });
    assert.equal(r.seq, 42);
  });

  it("asks for the state again when the room refused the ask for its reply budget, and resumes after", async () => {
    // Other tabs of the user had spent its reply budget: the room refused this get_state
    // (`rate_limited`, no id). Never asked again, the connection had no baseline for good,
    // and its next reconnect started afresh, past every message missed meanwhile.
    const w = world();
    const r = room(w);
    await w.clock.advance(0);
    const s = w.last();
    welcome(s, { seq: 41, epoch: "e-a" });
    assert.equal(s.ofType("get_state").length, 1);
    s.receive({ type: "error", code: "rate_limited", message: "the state would cost 1048576 bytes" });
    s.receive(message(42));
    await w.clock.advance(999);
    assert.equal(s.ofType("get_state").length, 1, "not at once");
    await w.clock.advance(1_001);
    assert.equal(s.ofType("get_state").length, 2, "asked again 1-2 s later");
    s.receive({ type: "state", seq: 42, state: { bid: { value: 5, version: 40 } } });
    assert.deepEqual(r.state.get("bid"), { value: 5, version: 40 });
    s.receive(message(43));
    s.serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(w.last().params.get("since"), "43", "a resume, not a fresh start");
    assert.equal(w.last().params.get("epoch"), "e-a");
  });

  it("a refusal of another frame after the state came asks nothing again", async () => {
    const { w } = await connected();
    const s = w.last();
    s.receive({ type: "error", code: "rate_limited", message: "slow down" });
    await w.clock.advance(3_000);
    assert.equal(s.ofType("get_state").length, 1);
  });

  it("a drop before the state arrived reconnects fresh, not with a resume", async () => {
    const w = world();
    const r = room(w);
    await w.clock.advance(0);
    welcome(w.last(), { seq: 10 });
    w.last().serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(w.last().params.get("since"), null);
  });
});

describe("resume", () => {
  it("reconnects with since and epoch, applies the replay in order and marks it", async () => {
    const { w, r } = await connected({ welcome: { seq: 3, epoch: "e-7" } });
    const seen: MessageEvent[] = [];
    r.on("message", (m) => seen.push(m));
    w.last().receive(message(4));
    w.last().serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    const s = w.last();
    assert.equal(s.params.get("since"), "4");
    assert.equal(s.params.get("epoch"), "e-7");
    welcome(s, { seq: 6, epoch: "e-7", resumed: true, missed: 2 });
    s.receive(message(5));
    s.receive(message(6));
    s.receive(message(7));
    assert.deepEqual(seen.map((m) => [m.seq, m.replayed]), [[4, false], [5, true], [6, true], [7, false]]);
    assert.equal(r.status.resumed, true);
    assert.equal(r.status.missed, 2);
    assert.equal(s.ofType("get_state").length, 0, "a resume needs no snapshot");
  });

  it("ignores a message it already applied", async () => {
    const { w, r } = await connected();
    const seen: number[] = [];
    r.on("message", (m) => seen.push(m.seq));
    w.last().receive(message(1));
    w.last().receive(message(1));
    w.last().receive(message(2));
    assert.deepEqual(seen, [1, 2]);
  });

  it("rebuilds the state on resync and continues from its seq", async () => {
    const { w, r } = await connected({ welcome: { seq: 0, epoch: "e-old" } });
    w.last().receive(stateMessage(1, "gone", "x"));
    w.last().serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    const s = w.last();
    const resyncs: ResyncEvent[] = [];
    r.on("resync", (e) => resyncs.push(e));
    welcome(s, { seq: 500, epoch: "e-new", resumed: false });
    s.receive({ type: "resync", reason: "epoch", seq: 500, state: { bid: { value: 99, version: 480 } } });
    assert.deepEqual([...r.state.keys()], ["bid"], "the old view is dropped");
    assert.equal(r.seq, 500);
    assert.deepEqual(resyncs, [{ reason: "epoch", seq: 500 }]);
    s.receive(message(501));
    assert.equal(r.seq, 501);
    assert.equal(r.status.epoch, "e-new");
    // The next resume uses the new epoch.
    s.serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(w.last().params.get("epoch"), "e-new");
    assert.equal(w.last().params.get("since"), "501");
  });

  it("handles batch frames in order", async () => {
    const { w, r } = await connected();
    const seen: number[] = [];
    r.on("message", (m) => seen.push(m.seq));
    w.last().receive({ type: "batch", frames: [message(1), message(2), { type: "pong" }, message(3)] });
    assert.deepEqual(seen, [1, 2, 3]);
  });
});

describe("gap detection", () => {
  it("a skipped seq is not applied: the client reconnects promptly with since = last contiguous seq", async () => {
    const { w, r } = await connected({ welcome: { seq: 10, epoch: "e1" } });
    const seen: number[] = [];
    r.on("message", (m) => seen.push(m.seq));
    const s = w.last();
    s.receive(message(11));
    s.receive(message(13)); // 12 is missing
    s.receive(message(14)); // ignored: the socket is abandoned
    assert.deepEqual(seen, [11]);
    assert.equal(s.closedByClient?.code, 4000);
    assert.equal(r.status.why, "gap");
    await w.clock.advance(1_000);
    assert.equal(w.sockets.length, 2, "reconnects within the 1 s prompt window");
    const again = w.last();
    assert.equal(again.params.get("since"), "11");
    assert.equal(again.params.get("epoch"), "e1");
    welcome(again, { seq: 14, epoch: "e1", resumed: true, missed: 3 });
    again.receive(message(12));
    again.receive(message(13));
    again.receive(message(14));
    assert.deepEqual(seen, [11, 12, 13, 14]);
  });

  it("a gap inside a replay also reconnects", async () => {
    const { w, r } = await connected({ welcome: { seq: 1 } });
    w.last().serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    welcome(w.last(), { seq: 5, resumed: true, missed: 4 });
    w.last().receive(message(2));
    w.last().receive(message(4));
    assert.equal(w.last().closedByClient?.code, 4000);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    assert.equal(w.last().params.get("since"), "2");
  });

  it("a gap that repeats backs off instead of looping", async () => {
    const { w, r } = await connected({ welcome: { seq: 0 } });
    w.last().receive(message(2));
    await w.clock.advance(1_000);
    w.last().open(); // connected but the server sends a gap before any welcome
    w.last().serverClose(1006);
    assert.ok(r.status.retryAt! - w.clock.t < 4_000);
    assert.equal(r.status.attempt, 2);
  });
});

describe("state messages", () => {
  it("apply $state messages and emit state events; versions never go back", async () => {
    const { w, r } = await connected();
    const events: Array<[string, unknown, number]> = [];
    r.on("state", (e) => events.push([e.key, e.value, e.version]));
    w.last().receive(stateMessage(1, "bid", 10));
    w.last().receive(stateMessage(2, "bid", 20));
    assert.deepEqual(r.state.get("bid"), { value: 20, version: 2 });
    assert.deepEqual(events, [["bid", 10, 1], ["bid", 20, 2]]);
  });
});
