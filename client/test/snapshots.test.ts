//! The snapshots the React hooks read: `status`, `presence` and `state` are
//! the same object until something they show changes, frozen, and
//! `subscribe` fires when they may have changed.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { IDLE_STATUS } from "../src/status.js";
import { message, stateMessage } from "./fakes.js";
import { connected } from "./helpers.js";

const member = (user: string, state = {}) => ({ user, region: "EU", state, since: 1 });

describe("snapshots", () => {
  it("status: one frozen object until a field changes", async () => {
    const { w, r } = await connected();
    const a = r.status;
    assert.equal(r.status, a, "read twice, nothing changed: the same object");
    assert.ok(Object.isFrozen(a));
    w.last().receive({ type: "pong" });
    assert.equal(r.status, a, "a frame that changes nothing shown");
    w.last().receive(message(1));
    const b = r.status;
    assert.notEqual(b, a);
    assert.equal(b.seq, 1);
    assert.equal(a.seq, 0, "the old snapshot is untouched");
    w.last().serverClose(1006, "gone");
    const c = r.status;
    assert.ok(Object.isFrozen(c.lastClose));
    assert.equal(r.status, c);
    await w.clock.advance(c.retryAt! - w.clock.t);
    const d = r.status;
    assert.equal(d.lastClose, c.lastClose, "the same close: the same object");
    w.last().refuse();
    w.last().serverClose(1006, "gone"); // ignored: already closed
    const e = r.status;
    assert.deepEqual(e.lastClose, { code: 1006, reason: "" });
    await w.clock.advance(e.retryAt! - w.clock.t);
    w.last().serverClose(1006, "");
    assert.notEqual(r.status.lastClose, e.lastClose, "another close with the same code and reason: a new object");
  });

  it("status before start is the idle one", async () => {
    const { Room } = await import("../src/room.js");
    const r = new Room({ room: "r1", url: "https://x.example" });
    assert.deepEqual(r.status, IDLE_STATUS);
  });

  it("presence: the same object until a diff, summary or own state change; members are a copy", async () => {
    const { w, r } = await connected();
    const a = r.presence;
    assert.equal(r.presence, a);
    assert.ok(Object.isFrozen(a));
    w.last().receive({ type: "presence", joins: { "s-other-1": member("bob") }, leaves: [] });
    const b = r.presence;
    assert.notEqual(b, a);
    assert.equal(b.count, 2);
    assert.equal(a.count, 1, "the old snapshot still says 1");
    assert.equal(r.presence, b);
    w.last().receive({ type: "summary", members: 2, users: 2, connections: 2, regions: {} });
    const c = r.presence;
    assert.notEqual(c, b);
    r.setPresence({ typing: true });
    const d = r.presence;
    assert.notEqual(d, c);
    assert.deepEqual(d.members.get(r.session)?.state, { typing: true });
    assert.equal(c.members.get(r.session)?.state.typing, undefined);
  });

  it("state: the same Map until a key changes; an entry keeps its identity until its key changes", async () => {
    const { w, r } = await connected();
    w.last().receive(stateMessage(1, "a", 1));
    w.last().receive(stateMessage(2, "b", 2));
    const m1 = r.state;
    assert.equal(r.state, m1);
    const a1 = m1.get("a");
    assert.deepEqual(a1, { value: 1, version: 1 });
    assert.ok(Object.isFrozen(a1));
    w.last().receive(stateMessage(3, "b", 3));
    const m2 = r.state;
    assert.notEqual(m2, m1);
    assert.equal(m2.get("a"), a1, "key a did not change: same entry");
    assert.deepEqual(m2.get("b"), { value: 3, version: 3 });
    assert.deepEqual(m1.get("b"), { value: 2, version: 2 }, "the old snapshot is untouched");
    w.last().receive(message(4));
    assert.equal(r.state, m2, "a plain message leaves the state alone");
  });

  it("subscribe fires on status, presence, summary, state and resync; the unsubscribe stops it", async () => {
    const { w, r } = await connected();
    let n = 0;
    const off = r.subscribe(() => n++);
    w.last().receive(stateMessage(1, "a", 1)); // state + status
    const afterState = n;
    assert.ok(afterState >= 2, `${afterState}`);
    w.last().receive({ type: "presence", joins: { "s-other-1": member("bob") }, leaves: [] });
    assert.equal(n, afterState + 1);
    w.last().receive({ type: "summary", members: 2, users: 2, connections: 2, regions: {} });
    assert.equal(n, afterState + 2);
    w.last().receive({ type: "resync", reason: "gap", seq: 5, state: {} });
    assert.ok(n >= afterState + 3);
    off();
    const before = n;
    w.last().receive(message(6));
    assert.equal(n, before);
  });
});
