// bench/profile-connects.mjs: where a connect's runtime CPU goes. Takes a CPU profile of the
// local runtime through `wrangler dev`'s inspector while N clients connect to one room (20 at
// a time, each until its welcome), writes it (open it in Chrome's DevTools, Performance tab)
// and prints the functions by self and by inclusive share of the busy samples.
//
//   HOMEROOM_KEEP_NAMES=1 scripts/dev --port 8799 --inspector-port 9239 --var LOG_CONNECTIONS:off &
//   node bench/profile-connects.mjs --port 8799 --inspector 9239 --connects 400
//
// The profiler slows what it samples: read the shares, not the milliseconds (bench/run's
// CPU per connect is the figure). HOMEROOM_KEEP_NAMES=1 keeps the Wasm's function names
// (scripts/build-worker drops them otherwise, and the profile shows wasm-function[N]).
// `ws` is wrangler's own dependency, pinned by the lock file.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import WebSocket from "ws";

const { values: o } = parseArgs({
  options: {
    port: { type: "string", default: "8799" },
    inspector: { type: "string", default: "9239" },
    connects: { type: "string", default: "400" },
    // Members connected before the profile starts: above the room's `large_room` (100) a join
    // sends no per-member presence diffs, as in a big room's storm.
    warm: { type: "string", default: "20" },
    out: { type: "string", default: "connects.cpuprofile" },
    top: { type: "string", default: "30" },
  },
});
const n = Number(o.connects);
const room = `profile-${Date.now()}`;

const targets = await (await fetch(`http://127.0.0.1:${o.inspector}/json`)).json();
const target = targets.find((t) => t.webSocketDebuggerUrl);
if (!target) throw new Error(`no inspector target at port ${o.inspector}`);
const cdp = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((ok, fail) => (cdp.once("open", ok), cdp.once("error", fail)));
let next = 0;
const pending = new Map();
cdp.on("message", (m) => {
  const v = JSON.parse(m);
  if (pending.has(v.id)) pending.get(v.id)(v), pending.delete(v.id);
});
const call = (method, params = {}) =>
  new Promise((ok) => {
    const id = ++next;
    pending.set(id, ok);
    cdp.send(JSON.stringify({ id, method, params }));
  });

/** One client, until its welcome (`null` if the socket failed). */
const connect = (i) =>
  new Promise((ok) => {
    const session = `s-profile-${String(i).padStart(7, "0")}`;
    const ws = new WebSocket(`ws://127.0.0.1:${o.port}/rooms/${room}/ws?session=${session}`);
    ws.on("message", (m) => String(m).startsWith('{"type":"welcome"') && ok(ws));
    ws.on("error", () => ok(null));
  });
const crowd = async (from, count) => {
  const all = [];
  for (let b = 0; b < count; b += 20) {
    const batch = [];
    for (let i = b; i < Math.min(count, b + 20); i++) batch.push(connect(from + i));
    all.push(...(await Promise.all(batch)));
  }
  return all;
};

const warm = await crowd(1_000_000, Number(o.warm)); // the room loaded, the code compiled
await call("Profiler.enable");
await call("Profiler.setSamplingInterval", { interval: 100 });
await call("Profiler.start");
const started = Date.now();
const sockets = await crowd(0, n);
const wall = Date.now() - started;
const profile = (await call("Profiler.stop")).result.profile;
writeFileSync(o.out, JSON.stringify(profile));

const byId = new Map(profile.nodes.map((x) => [x.id, x]));
const parent = new Map();
for (const x of profile.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
const hits = new Map();
for (const s of profile.samples) hits.set(s, (hits.get(s) ?? 0) + 1);
const name = (node) => node.callFrame.functionName || `(anonymous ${node.callFrame.url})`;
const us = (profile.endTime - profile.startTime) / profile.samples.length;
const self = new Map();
const inclusive = new Map();
let busy = 0;
for (const [id, count] of hits) {
  const own = name(byId.get(id));
  if (own === "(idle)" || own === "(program)") continue;
  busy += count;
  self.set(own, (self.get(own) ?? 0) + count);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const f = name(byId.get(at));
    if (!seen.has(f)) seen.add(f), inclusive.set(f, (inclusive.get(f) ?? 0) + count);
  }
}
const ok = sockets.filter(Boolean).length;
console.log(`${ok} of ${n} connects in ${wall} ms; busy samples ${((busy * us) / 1000).toFixed(0)} ms (${((busy * us) / 1000 / n).toFixed(2)} ms per connect, profiler included); ${o.out}`);
const show = (title, m) => {
  console.log(`--- ${title}`);
  for (const [f, c] of [...m].sort((a, b) => b[1] - a[1]).slice(0, Number(o.top))) {
    console.log(`${((c / busy) * 100).toFixed(1).padStart(5)}%  ${f.replace(/::h[0-9a-f]{16}$/, "").slice(0, 140)}`);
  }
};
show("self", self);
show("inclusive", inclusive);
for (const s of [...sockets, ...warm]) s?.terminate();
cdp.close();
