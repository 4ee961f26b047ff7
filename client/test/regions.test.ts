//! Region choice: probe every endpoint's /probe at once, first to open wins,
//! failures ignored, 2.5 s timeout, all fail → the first endpoint, the
//! choice kept 24 h, and the same endpoint within 60 s of a drop.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { PIN_KEY } from "../src/regions.js";
import { welcome, world, type FakeSocket, type World } from "./fakes.js";
import { room } from "./helpers.js";

const EU = "https://eu.rooms.example";
const US = "https://us.rooms.example";
const AP = "https://ap.rooms.example";
const REGIONS = [EU, US, AP];

const probes = (w: World): FakeSocket[] => w.sockets.filter((s) => s.path === "/probe");
const roomSockets = (w: World): FakeSocket[] => w.sockets.filter((s) => s.path.startsWith("/rooms/"));
const host = (s: FakeSocket): string => new URL(s.url).host;

describe("region probing", () => {
  it("probes every endpoint at once over wss://…/probe and takes the first to open", async () => {
    const w = world();
    const r = room(w, { regions: REGIONS });
    await w.clock.advance(0);
    const p = probes(w);
    assert.deepEqual(p.map((s) => s.url), ["wss://eu.rooms.example/probe", "wss://us.rooms.example/probe", "wss://ap.rooms.example/probe"]);
    assert.equal(roomSockets(w).length, 0, "no room connect before a winner");
    await w.clock.advance(80);
    p[1]!.open(); // US first
    await w.clock.advance(0);
    p[0]!.open(); // EU later: too late
    await w.clock.advance(0);
    assert.equal(roomSockets(w).length, 1);
    assert.equal(host(roomSockets(w)[0]!), "us.rooms.example");
    for (const s of p) assert.ok(s.closedByClient, "every probe socket is closed");
    assert.equal(p[1]!.closedByClient?.code, 1000);
    assert.equal(JSON.parse(w.local.getItem(PIN_KEY)!).url, US);
    welcome(roomSockets(w)[0]!);
    assert.equal(r.status.endpoint, US);
    assert.equal(r.status.endpointChoice, "probed");
  });

  it("ignores failed probes", async () => {
    const w = world();
    room(w, { regions: REGIONS });
    await w.clock.advance(0);
    const p = probes(w);
    p[0]!.refuse();
    p[2]!.refuse();
    await w.clock.advance(300);
    p[1]!.open();
    await w.clock.advance(0);
    assert.equal(host(roomSockets(w)[0]!), "us.rooms.example");
  });

  it("falls back to the first endpoint when nothing opens within 2.5 s", async () => {
    const w = world();
    const r = room(w, { regions: REGIONS });
    await w.clock.advance(2_499);
    assert.equal(roomSockets(w).length, 0);
    await w.clock.advance(1);
    assert.equal(host(roomSockets(w)[0]!), "eu.rooms.example");
    assert.equal(r.status.endpointChoice, "fallback");
    assert.equal(w.local.getItem(PIN_KEY), null, "a fallback is not remembered");
    probes(w)[2]!.open(); // a late open changes nothing
    await w.clock.advance(0);
    assert.equal(roomSockets(w).length, 1);
  });

  it("falls back to the first endpoint at once when every probe fails", async () => {
    const w = world();
    room(w, { regions: REGIONS });
    await w.clock.advance(0);
    for (const s of probes(w)) s.refuse();
    await w.clock.advance(0);
    assert.equal(host(roomSockets(w)[0]!), "eu.rooms.example");
  });

  it("a probe that opens then closes (as /probe does) counts as a win, not a failure", async () => {
    const w = world();
    room(w, { regions: [EU, US] });
    await w.clock.advance(0);
    probes(w)[0]!.refuse();
    probes(w)[1]!.open();
    probes(w)[1]!.serverClose(1000);
    await w.clock.advance(0);
    assert.equal(host(roomSockets(w)[0]!), "us.rooms.example");
  });

  it("keeps the choice for 24 h: no probes on the next load, probes again after", async () => {
    const w = world();
    w.local.setItem(PIN_KEY, JSON.stringify({ url: AP, chosenAt: w.clock.t - 23 * 3600_000 }));
    const r1 = room(w, { regions: REGIONS });
    await w.clock.advance(0);
    assert.equal(probes(w).length, 0);
    assert.equal(host(roomSockets(w)[0]!), "ap.rooms.example");
    assert.equal(r1.status.endpointChoice, "pinned");
    r1.close();

    w.local.setItem(PIN_KEY, JSON.stringify({ url: AP, chosenAt: w.clock.t - 24 * 3600_000 }));
    room(w, { regions: REGIONS });
    await w.clock.advance(0);
    assert.equal(probes(w).length, 3, "an expired pin is probed again");
  });

  it("ignores a pin for an endpoint that is not in the list", async () => {
    const w = world();
    w.local.setItem(PIN_KEY, JSON.stringify({ url: "https://old.example", chosenAt: w.clock.t }));
    room(w, { regions: REGIONS });
    await w.clock.advance(0);
    assert.equal(probes(w).length, 3);
  });

  it("within 60 s of a drop reconnects to the same endpoint without probing", async () => {
    const w = world();
    const r = room(w, { regions: REGIONS });
    await w.clock.advance(0);
    probes(w)[2]!.open();
    await w.clock.advance(0);
    welcome(roomSockets(w)[0]!);
    await w.clock.advance(30_000);
    // Another tab re-probed meanwhile and pinned EU: this session still goes back to AP.
    w.local.setItem(PIN_KEY, JSON.stringify({ url: EU, chosenAt: w.clock.t }));
    roomSockets(w)[0]!.serverClose(1006);
    const down = w.clock.t;
    for (let i = 1; w.clock.t - down < 60_000; i++) {
      await w.clock.advance(r.status.retryAt! - w.clock.t);
      if (w.clock.t - down > 60_000) break;
      const s = roomSockets(w)[i]!;
      assert.equal(host(s), "ap.rooms.example");
      assert.equal(r.status.endpointChoice, "sticky");
      s.refuse();
    }
    assert.equal(probes(w).length, 3, "no probing during the sticky minute");
  });

  it("after a minute of failing on one endpoint, forgets it and probes again", async () => {
    const w = world();
    const r = room(w, { regions: REGIONS });
    await w.clock.advance(0);
    probes(w)[2]!.open(); // AP
    await w.clock.advance(0);
    welcome(roomSockets(w)[0]!);
    roomSockets(w)[0]!.serverClose(1006);
    const down = w.clock.t;
    // AP stays down.
    while (probes(w).length === 3) {
      await w.clock.advance(r.status.retryAt! - w.clock.t);
      const last = w.last();
      if (last.path === "/probe") break;
      assert.equal(host(last), "ap.rooms.example");
      last.refuse();
    }
    assert.ok(w.clock.t - down > 60_000, "probing again only after the sticky minute");
    assert.equal(w.local.getItem(PIN_KEY), null, "the failing pin is forgotten");
    const again = probes(w).slice(3);
    assert.equal(again.length, 3);
    again[2]!.refuse();
    again[0]!.open(); // EU is up
    await w.clock.advance(0);
    assert.equal(host(w.last()), "eu.rooms.example");
    assert.equal(JSON.parse(w.local.getItem(PIN_KEY)!).url, EU);
  });

  it("one endpoint: never probes", async () => {
    const w = world();
    room(w, { regions: [EU] });
    await w.clock.advance(0);
    assert.equal(probes(w).length, 0);
    assert.equal(host(w.last()), "eu.rooms.example");
  });
});
