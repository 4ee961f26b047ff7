// scripts/mint-token.mjs: mints a room token as PROTOCOL.md "Auth" defines it,
//   base64url(payload) "." base64url(HMAC-SHA256(secret, base64url(payload)))
// (base64url without padding), payload {"room": room or "*", "sub": user, "exp": unix seconds}.
// Run it through scripts/mint-token. Node built-ins only. src/auth.rs is the
// verifier; its known-answer test pins this script's output.

import { createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DEV_VARS = join(ROOT, ".dev.vars");

const USAGE = `usage: scripts/mint-token --sub <user> [--room <room>] [--ttl <seconds> | --exp <unix seconds>]

Prints a token for GET /rooms/{room}/ws?token=... (PROTOCOL.md "Auth").

  --sub <user>   the user id (1-64 chars of A-Z a-z 0-9 . _ - : @ + |)
  --room <room>  the room the token is good for; omit it (or pass '*', quoted so
                 the shell does not expand it) for a token good in every room
  --ttl <secs>   lifetime from now, default 3600
  --exp <unix>   absolute expiry in unix seconds instead of --ttl (deterministic output)

The secret is $AUTH_SECRET, or else the AUTH_SECRET= line of ${DEV_VARS}.`;

function fail(msg) {
  process.stderr.write(`mint-token: ${msg}\n`);
  process.exit(2);
}

// The same rules as src/auth.rs (valid_user) and src/protocol/names.rs (valid_room).
const validUser = (s) => /^[A-Za-z0-9._\-:@+|]{1,64}$/.test(s);
const validRoom = (s) => /^[A-Za-z0-9._:\-]{1,64}$/.test(s) && s !== "." && s !== "..";
const unixSeconds = (s) => /^[0-9]{1,15}$/.test(s);

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    if (arg === "-h" || arg === "--help") {
      process.stdout.write(USAGE + "\n");
      process.exit(0);
    }
    let value;
    const eq = arg.indexOf("=");
    if (arg.startsWith("--") && eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (!["--sub", "--room", "--ttl", "--exp"].includes(arg)) {
      fail(`unexpected argument \`${argv[i]}\` (an unquoted * expands to file names: quote it)\n\n${USAGE}`);
    }
    if (value === undefined) {
      if (i + 1 >= argv.length) fail(`${arg} needs a value`);
      value = argv[++i];
    }
    const key = arg.slice(2);
    if (key in opts) fail(`${arg} given twice`);
    opts[key] = value;
  }
  return opts;
}

// AUTH_SECRET from .dev.vars, read the way wrangler's dotenv parser reads it:
// the last assignment wins; "…", '…' and `…` quote; unquoted values end at #.
function secretFromDevVars() {
  if (!existsSync(DEV_VARS)) return undefined;
  let found;
  for (const line of readFileSync(DEV_VARS, "utf8").split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?AUTH_SECRET\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let v = m[1].trim();
    const q = /^(["'`])(.*)\1(?:\s*#.*)?$/.exec(v);
    if (q) {
      v = q[1] === '"' ? q[2].replace(/\\n/g, "\n").replace(/\\r/g, "\r") : q[2];
    } else {
      v = v.split("#")[0].trim();
    }
    found = v;
  }
  return found;
}

const opts = parseArgs(process.argv.slice(2));
if (opts.sub === undefined) fail(`--sub is required\n\n${USAGE}`);
if (!validUser(opts.sub)) fail("--sub must be 1-64 characters of A-Z a-z 0-9 . _ - : @ + |");
const room = opts.room ?? "*";
if (room !== "*" && !validRoom(room)) {
  fail("--room must be '*' or 1-64 characters of A-Z a-z 0-9 . _ : - (not . or ..)");
}
if (opts.ttl !== undefined && opts.exp !== undefined) fail("give --ttl or --exp, not both");
let exp;
if (opts.exp !== undefined) {
  if (!unixSeconds(opts.exp)) fail("--exp must be unix seconds (a non-negative integer)");
  exp = Number(opts.exp);
} else {
  const ttl = opts.ttl ?? "3600";
  if (!/^[0-9]{1,10}$/.test(ttl) || Number(ttl) === 0) fail("--ttl must be a positive integer of seconds");
  exp = Math.floor(Date.now() / 1000) + Number(ttl);
}

let secret = process.env.AUTH_SECRET;
let source = "$AUTH_SECRET";
if (secret === undefined || secret === "") {
  secret = secretFromDevVars();
  source = DEV_VARS;
}
if (secret === undefined || secret === "") {
  fail(
    `no signing secret: set AUTH_SECRET in the environment or put a line AUTH_SECRET=<secret> in ${DEV_VARS}\n` +
      "(the same secret the Worker reads; without it the Worker runs in anonymous dev mode and needs no token)",
  );
}

// Key order room, sub, exp: the same bytes src/auth.rs `mint` produces.
const payload = Buffer.from(JSON.stringify({ room, sub: opts.sub, exp }), "utf8").toString("base64url");
const sig = createHmac("sha256", Buffer.from(secret, "utf8")).update(payload, "ascii").digest("base64url");
process.stdout.write(`${payload}.${sig}\n`);
if (process.stderr.isTTY) {
  process.stderr.write(
    `mint-token: room=${room} sub=${opts.sub} exp=${exp} (${new Date(exp * 1000).toISOString()}), secret from ${source}\n`,
  );
}
