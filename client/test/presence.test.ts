//! Presence: the member list from welcome and diffs (with reset and large
//! mode), per-region counts, summaries, and this session's presence state.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { welcome } from "./fakes.js";
import { connected } from "./helpers.js";

const m = (user: string, region: string, state = {}) => ({ user, region, state, since: 1 });

describe("presence", () => {
  it("tracks members, users and regions from welcome and diffs", async () => {
    const { w, r } = await connected({
      connect: { session: "s-me-000001" },
      welcome: { members: { "s-me-000001": m("alice", "OC"), "s-b-0000001": m("bob", "EU") } },
    });
    assert.equal(r.presence.count, 2);
    const s = w.last();
    s.receive({ type: "presence", joins: { "s-a2-000001": m("alice", "EU") }, leaves: [] });
    assert.equal(r.presence.count, 3);
    assert.equal(r.presence.users, 2);
    assert.deepEqual(r.presence.regions, { OC: { members: 1, users: 1 }, EU: { members: 2, users: 2 } });
    s.receive({ type: "presence", joins: {}, leaves: ["s-b-0000001"] });
    assert.deepEqual([...r.presence.members.keys()].sort(), ["s-a2-000001", "s-me-000001"]);
  });

  it("a reset replaces the list and reports who left", async () => {
    const { w, r } = await connected({
      connect: { session: "s-me-000001" },
      welcome: { members: { "s-me-000001": m("me", "OC"), "s-x-0000001": m("x", "OC") } },
    });
    const leaves: string[][] = [];
    r.on("presence", (e) => leaves.push(e.leaves));
    w.last().receive({ type: "presence", joins: { "s-me-000001": m("me", "OC") }, leaves: [], reset: true });
    assert.deepEqual([...r.presence.members.keys()], ["s-me-000001"]);
    assert.deepEqual(leaves, [["s-x-0000001"]]);
  });

  it("a member whose session is a name every object has still leaves on a reset", async () => {
    // `constructor` and `toString` are valid session names; `in` found them on the joins'
    // prototype, so such a member was never reported gone.
    const { w, r } = await connected({
      connect: { session: "s-me-000001" },
      welcome: { members: { "s-me-000001": m("me", "OC"), constructor: m("x", "OC"), toString: m("y", "OC") } },
    });
    const leaves: string[][] = [];
    r.on("presence", (e) => leaves.push(e.leaves));
    w.last().receive({ type: "presence", joins: { "s-me-000001": m("me", "OC") }, leaves: [], reset: true });
    assert.deepEqual([...r.presence.members.keys()], ["s-me-000001"]);
    assert.deepEqual(leaves.map((l) => [...l].sort()), [["constructor", "toString"]]);
  });

  it("large rooms keep no member list and count from the summary", async () => {
    const { w, r } = await connected({ welcome: { members: {}, large: true } });
    assert.equal(r.presence.large, true);
    w.last().receive({ type: "summary", members: 250, users: 200, connections: 260, regions: { NA: { members: 250, users: 200 } } });
    assert.equal(r.presence.count, 250);
    assert.equal(r.presence.users, 200);
    assert.deepEqual(r.presence.regions, { NA: { members: 250, users: 200 } });
    w.last().receive({ type: "presence", joins: { a: m("a", "NA") }, leaves: [], reset: true });
    assert.equal(r.presence.large, false, "a reset without large: a normal room again");
    assert.equal(r.presence.count, 1);
    w.last().receive({ type: "presence", joins: {}, leaves: [], reset: true, large: true });
    assert.equal(r.presence.large, true);
    assert.equal(r.presence.members.size, 0);
  });

  it("sends this session's presence state, and again after a reconnect when the room lost it", async () => {
    const { w, r } = await connected({ connect: { session: "s-me-000001", presence: { name: "Ada" } } });
    assert.deepEqual(w.last().ofType("presence"), [{ type: "presence", state: { name: "Ada" } }]);
    assert.deepEqual(r.presence.members.get("s-me-000001")?.state, { name: "Ada" }, "the local copy shows it at once");
    r.setPresence({ name: "Ada L." });
    assert.deepEqual(r.presence.members.get("s-me-000001")?.state, { name: "Ada L." }, "the local copy at once");
    assert.equal(w.last().ofType("presence").length, 1, "latest wins: within 100 ms of the last presence frame, it waits");
    await w.clock.advance(100);
    assert.equal(w.last().ofType("presence").length, 2);
    w.last().serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    // The room kept it: nothing to send.
    welcome(w.last(), { resumed: true, members: { "s-me-000001": m("s-me-000001", "OC", { name: "Ada L." }) } });
    assert.equal(w.last().ofType("presence").length, 0);
    w.last().serverClose(1006);
    await w.clock.advance(r.status.retryAt! - w.clock.t);
    // The room forgot it (TTL): send it again.
    welcome(w.last(), { resumed: true, members: {} });
    assert.deepEqual(w.last().ofType("presence"), [{ type: "presence", state: { name: "Ada L." } }]);
  });
});
