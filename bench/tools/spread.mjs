// bench/tools/spread.mjs: per-publish arrival spread in one room, to tell
// time spent before a broadcast starts (the first receiver) from time spent
// in it (the last receiver). A diagnostic beside homeroom-bench, not part of
// the benchmark or the tests.
//
//   node bench/tools/spread.mjs PORT homeroom|plain [CLIENTS=200] [SECONDS=15]
//
// PORT is a running `wrangler dev`: scripts/dev (homeroom; it needs
// `--var RATE_PER_SEC:100000`), or `npx wrangler dev` in bench/baselines/plain
// or bench/baselines/plain-durable (the plain room with one SQLite INSERT per
// message: what "stored before seen" alone costs); use `plain` for both. One client publishes 20/s; every client notes when
// each publish arrives. Prints, over publishes, the p50 and p99 of the first,
// median and last receiver's latency (ms). Uses the `ws` package wrangler
// brings into node_modules (Node 20 has no WebSocket client of its own).
import WebSocket from "ws";

const [port, kind, n = 200, secs = 15] = process.argv.slice(2);
if (!port || !["homeroom", "plain"].includes(kind)) {
  console.error("usage: node bench/tools/spread.mjs PORT homeroom|plain [CLIENTS] [SECONDS]");
  process.exit(2);
}
const room = `spread-${Math.random().toString(36).slice(2, 8)}`;
const blob = JSON.stringify({ colo: "LHR", country: "GB", continent: "EU" });
const url = (i) =>
  kind === "homeroom"
    ? `ws://127.0.0.1:${port}/rooms/${room}/ws?session=s-spread-${String(i).padStart(6, "0")}`
    : `ws://127.0.0.1:${port}/rooms/${room}/ws`;

const arrivals = new Map(); // publish k -> latencies (ms)
const sockets = [];
for (let i = 0; i < Number(n); i++) {
  const ws = new WebSocket(url(i), { headers: { "MF-CF-Blob": blob }, perMessageDeflate: false });
  await new Promise((ok, fail) => {
    ws.on("open", ok);
    ws.on("error", fail);
  });
  ws.on("message", (buf) => {
    const at = performance.now();
    const m = buf.toString().match(/"k":(\d+),"t":([\d.]+)/);
    if (!m) return; // welcome, ack, summary...
    const k = Number(m[1]);
    if (!arrivals.has(k)) arrivals.set(k, []);
    arrivals.get(k).push(at - Number(m[2]));
  });
  sockets.push(ws);
}
await new Promise((ok) => setTimeout(ok, 1500));

const end = performance.now() + Number(secs) * 1000;
for (let k = 0; performance.now() < end; k++) {
  const data = { k, t: performance.now(), pad: "x".repeat(64) };
  const text =
    kind === "homeroom"
      ? JSON.stringify({ type: "publish", id: `m${k}`, topic: "spread", data })
      : JSON.stringify(data);
  sockets[0].send(text);
  await new Promise((ok) => setTimeout(ok, 50));
}
await new Promise((ok) => setTimeout(ok, 1000));

const first = [];
const median = [];
const last = [];
for (const lat of arrivals.values()) {
  if (lat.length < Number(n) * 0.9) continue; // the tail end of the run
  lat.sort((a, b) => a - b);
  first.push(lat[0]);
  median.push(lat[lat.length >> 1]);
  last.push(lat[lat.length - 1]);
}
const q = (xs, p) => xs.sort((a, b) => a - b)[Math.floor(xs.length * p)].toFixed(2);
console.log(
  `${kind}: ${first.length} publishes; p50 first ${q(first, 0.5)} median ${q(median, 0.5)} last ${q(last, 0.5)} ms;` +
    ` p99 first ${q(first, 0.99)} last ${q(last, 0.99)} ms`,
);
process.exit(0);
