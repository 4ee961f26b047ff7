// scripts/mint-token.mjs: prints a room token for development, minted by the
// client package's own `mintToken()` (client/src/token.ts, the `homeroom/token`
// entry point: an HS256 JWT over WebCrypto), imported from the built
// client/dist. This file only reads flags and the secret. Run it through
// scripts/mint-token. `--legacy` makes the two-part format of before JWTs
// (src/auth/legacy.rs, accepted during the transition; its known-answer
// tests were computed with it).

import { createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DEV_VARS = join(ROOT, ".dev.vars");
const TOKEN_JS = join(ROOT, "client/dist/token.js");

const USAGE = `usage: scripts/mint-token --sub <user> [--kind <kind>] [--room <room>] [--ttl <seconds> | --exp <unix seconds>]
                         [--iat <unix seconds>] [--info <json object>] [--kid <key id>]
                         [--max-ttl <seconds>] [--legacy]

Prints a token for GET /{kind}/{room}/ws?token=... (an HS256 JWT; README "Tokens").

  --sub <user>    the user id (1-64 chars of A-Z a-z 0-9 . _ - : @ + |)
  --kind <kind>   the kind of room it opens: a path segment ('chat' opens
                  /chat/{room}/...), kinds separated by commas, or '*' for
                  every kind; default 'rooms' (the open rooms)
  --room <room>   the room the token is good for: a room name, a prefix ending
                  in * ('auction:*'), or '*' for every room (the default).
                  Quote a * so the shell does not expand it
  --ttl <secs>    lifetime from now, default 3600 (at most 86400, the Worker's
                  default TOKEN_MAX_TTL_SECS)
  --exp <unix>    absolute expiry in unix seconds instead of --ttl
  --iat <unix>    issued-at (default now; with --exp: deterministic output)
  --info <json>   a JSON object of at most 1 KiB: the member's verified info
  --kid <id>      the secret's key id (AUTH_SECRET_KID), put in the header
  --max-ttl <s>   the deployment's TOKEN_MAX_TTL_SECS if not the default 86400
  --legacy        the two-part format of before JWTs (room, kind, sub, exp only)

The secret is $AUTH_SECRET, or else the AUTH_SECRET= line of ${DEV_VARS}.`;

const FLAGS = ["--sub", "--kind", "--room", "--ttl", "--exp", "--iat", "--info", "--kid", "--max-ttl"];

function fail(msg) {
  process.stderr.write(`mint-token: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    if (arg === "-h" || arg === "--help") {
      process.stdout.write(USAGE + "\n");
      process.exit(0);
    }
    if (arg === "--legacy") {
      opts.legacy = true;
      continue;
    }
    let value;
    const eq = arg.indexOf("=");
    if (arg.startsWith("--") && eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (!FLAGS.includes(arg)) {
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

/** A flag of unix seconds (or a ttl) as a number; the minter checks the rest. */
function integer(flag, s) {
  if (!/^[0-9]{1,15}$/.test(s)) fail(`--${flag} must be a non-negative integer`);
  return Number(s);
}

const opts = parseArgs(process.argv.slice(2));
if (opts.sub === undefined) fail(`--sub is required\n\n${USAGE}`);
if (opts.ttl !== undefined && opts.exp !== undefined) fail("give --ttl or --exp, not both");

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

const room = opts.room ?? "*";
const kinds = (opts.kind ?? "rooms").split(",").map((k) => k.trim());
const kind = kinds.length === 1 ? kinds[0] : kinds;
let token;
let exp;
if (opts.legacy) {
  for (const f of ["info", "kid", "iat", "max-ttl"]) if (opts[f] !== undefined) fail(`--${f} has no place in a --legacy token`);
  if (!/^[A-Za-z0-9._\-:@+|]{1,64}$/.test(opts.sub)) fail("--sub must be 1-64 characters of A-Z a-z 0-9 . _ - : @ + |");
  if (room !== "*" && !(/^[A-Za-z0-9._:-]{1,64}$/.test(room) && room !== "." && room !== "..")) {
    fail("--room must be '*' or a room name (a --legacy token takes no prefix)");
  }
  exp = opts.exp !== undefined ? integer("exp", opts.exp) : Math.floor(Date.now() / 1000) + integer("ttl", opts.ttl ?? "3600");
  // Key order room, kind, sub, exp: the bytes src/auth/legacy.rs `mint` makes.
  const payload = Buffer.from(JSON.stringify({ room, kind, sub: opts.sub, exp }), "utf8").toString("base64url");
  const sig = createHmac("sha256", Buffer.from(secret, "utf8")).update(payload, "ascii").digest("base64url");
  token = `${payload}.${sig}`;
} else {
  if (!existsSync(TOKEN_JS)) fail(`${TOKEN_JS} is missing: run scripts/build-client first`);
  const { mintToken } = await import(pathToFileURL(TOKEN_JS).href);
  const o = { secret, room, kind, sub: opts.sub };
  if (opts.exp !== undefined) o.exp = integer("exp", opts.exp);
  if (opts.ttl !== undefined) o.ttl = integer("ttl", opts.ttl);
  if (opts.iat !== undefined) o.iat = integer("iat", opts.iat);
  if (opts.kid !== undefined) o.kid = opts.kid;
  if (opts["max-ttl"] !== undefined) o.maxTtl = integer("max-ttl", opts["max-ttl"]);
  if (opts.info !== undefined) {
    try {
      o.info = JSON.parse(opts.info);
    } catch (e) {
      fail(`--info is not JSON: ${e.message}`);
    }
  }
  try {
    token = await mintToken(o);
  } catch (e) {
    fail(String(e.message).replace(/^mintToken: /, "").replace("pass maxTtl", "pass --max-ttl"));
  }
  exp = JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString("utf8")).exp;
}

process.stdout.write(`${token}\n`);
if (process.stderr.isTTY) {
  process.stderr.write(
    `mint-token: kind=${kinds.join(",")} room=${room} sub=${opts.sub} exp=${exp} (${new Date(exp * 1000).toISOString()}), secret from ${source}\n`,
  );
}
