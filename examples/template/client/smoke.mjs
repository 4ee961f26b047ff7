// client/smoke.mjs: the Worker from a Node script, through the homeroom client package: two
// members join a poll, a write its rules refuse, the poll's timer closing it; a stranger and a
// wrong kind of room stop with a reason instead of retrying; /health is green.
//
//   npm install /path/to/homeroom-0.1.0.tgz     # the client (`npm pack ./client` in homeroom)
//   scripts/dev &                               # the Worker, with its .dev.vars
//   node client/smoke.mjs                       # Node 22 (Node 20: node --experimental-websocket)
//
// URL (default http://127.0.0.1:8787) says where the Worker is; the secrets come from .dev.vars.

import { readFileSync } from "node:fs";

import { connect, HomeroomError } from "homeroom";
import { mintToken } from "homeroom/token";

const url = process.env.URL ?? "http://127.0.0.1:8787";
const fail = (why) => {
  console.error(`smoke: ${why}`);
  process.exit(1);
};
if (typeof WebSocket === "undefined") {
  fail("this Node has no WebSocket: use Node 22, or `node --experimental-websocket` on Node 20");
}
const vars = Object.fromEntries(
  readFileSync(".dev.vars", "utf8")
    .split(/\r?\n/)
    .filter((l) => /^[A-Z_]+=/.test(l))
    .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1).trim()]),
);
const room = `poll-${Date.now().toString(36)}`;
const token = (sub, info) => mintToken({ secret: vars.AUTH_SECRET, room, kind: "poll", sub, ttl: 600, info });

/** Resolves once `pred()` holds (checked on every event of `r`), or fails after `ms`. */
function until(r, what, pred, ms = 10_000) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => fail(`${what}: not within ${ms} ms (status ${JSON.stringify(r.status)})`), ms);
    const check = () => {
      if (pred()) {
        clearTimeout(timer);
        off();
        resolve();
      }
    };
    const off = r.subscribe(check);
    check();
  });
}

/** The error code a rejected write gives. */
async function refusal(write) {
  try {
    await write;
  } catch (e) {
    return e instanceof HomeroomError ? e.code : `not a HomeroomError: ${e}`;
  }
  return "accepted";
}

/**
 * A POST, sent again (up to 3 times) if `wrangler dev`'s own proxy lost it on the way to the
 * runtime: its 503 "Your worker restarted mid-request." comes when kj's two 5 s keep-alive
 * timeouts meet, and the Worker never read the request (cloudflare/workers-sdk#14641). The proxy
 * sends a lost GET again itself. Deployed, there is no such proxy.
 */
async function post(url, init) {
  for (let tries = 1; ; tries++) {
    const res = await fetch(url, { ...init, method: "POST" });
    if (res.status !== 503 || tries === 3) return res;
    if (!(await res.clone().text()).startsWith("Your worker restarted mid-request.")) return res;
  }
}

const opened = await post(`${url}/poll/${room}/open`, {
  headers: { authorization: `Bearer ${vars.ADMIN_KEY}`, "content-type": "application/json" },
  body: JSON.stringify({ question: "Tea or coffee?", options: ["tea", "coffee"], seconds: 4 }),
});
if (opened.status !== 200) fail(`opening the poll: ${opened.status} ${await opened.text()}`);

const member = (sub) => connect({ url, room, kind: "poll", getToken: () => token(sub, { name: sub, member: true }) });
const ann = member("ann");
const bob = member("bob");
const messages = [];
ann.on("message", (m) => messages.push(m));
await until(ann, "both members present", () => ann.status.state === "open" && ann.presence.count === 2);

// One vote each; a second vote and a write of the tally are refused by the rules.
await ann.publish("vote", { option: "tea" });
await bob.publish("vote", { option: "coffee" });
const again = await refusal(ann.publish("vote", { option: "coffee" }));
if (again !== "already_voted") fail(`a second vote: ${again}`);
const forged = await refusal(ann.set("tally", { tea: 99 }));
if (forged !== "read_only") fail(`writing the tally: ${forged}`);
await until(ann, "the tally", () => JSON.stringify(ann.state.get("tally")?.value) === '{"coffee":1,"tea":1}');

// The room's timer closes the poll and says so.
const closed = () => messages.find((m) => m.topic === "poll" && m.data?.event === "closed");
await until(ann, "the poll closed by its timer", () => closed() !== undefined && ann.state.get("poll")?.value?.open === false);

// A stranger is refused at join, a wrong kind at the edge: both stop, saying why. (Locally
// workerd holds a closed socket's TCP connection for about 12 s, and Node reports the close
// when it ends: hence the longer wait.)
const stranger = connect({ url, room, kind: "poll", getToken: () => token("eve", { name: "eve" }) });
await until(stranger, "the stranger stopped", () => stranger.status.state === "closed", 30_000);
const wrongKind = connect({ url, room, kind: "polls", token: await token("ann", { name: "ann", member: true }) });
await until(wrongKind, "the wrong kind stopped", () => wrongKind.status.state === "closed", 30_000);

// Nor does the stranger read who is in the poll: the member list is the members' (the rules'
// `read`, by default whoever `join` lets in).
const list = async (sub, info) => {
  const r = await fetch(`${url}/poll/${room}/presence?token=${await token(sub, info)}`);
  return { status: r.status, body: await r.json() };
};
const peek = await list("eve", { name: "eve" });
const own = await list("bob", { name: "bob", member: true });

const health = await fetch(`${url}/health`);
const report = await health.json();
for (const r of [ann, bob, stranger, wrongKind]) r.close();
const result = {
  room,
  members: 2,
  refused: [again, forged],
  tally: closed().data.tally,
  stranger: stranger.status.why,
  wrongKind: wrongKind.status.why,
  peek: [peek.status, peek.body.error],
  list: own.status,
  health: health.status,
};
console.log(JSON.stringify(result));
if (result.stranger !== "members_only") fail(`the stranger stopped with ${result.stranger}`);
if (result.wrongKind !== "no_such_kind") fail(`the wrong kind stopped with ${result.wrongKind}`);
if (peek.status !== 403 || peek.body.error !== "members_only") fail(`the stranger read the member list: ${JSON.stringify(peek)}`);
if (own.status !== 200 || !own.body.members) fail(`a member's list: ${JSON.stringify(own)}`);
if (health.status !== 200) fail(`/health: ${health.status} ${JSON.stringify(report)}`);
process.exit(0);
