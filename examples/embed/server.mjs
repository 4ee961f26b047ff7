// server.mjs: this app's own server. It serves the page and the bundle and
// hands out room tokens at /token, minted with homeroom/token's
// mintToken() (WebCrypto, no dependencies): the place where your backend
// decides who the user is and which rooms they may join.
//
//   AUTH_SECRET=<the deployment's secret, 32+ bytes> HOMEROOM_URL=http://127.0.0.1:8787 node server.mjs
//
// Environment: AUTH_SECRET (required), HOMEROOM_URL (the deployment,
// default http://127.0.0.1:8787), PORT (default 5173), HOST (default
// 127.0.0.1), TOKEN_TTL (seconds, default 600). The deployment must list
// this server's origin in CORS_ORIGINS for the page's HTTP presence call.

import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { mintToken } from "homeroom/token";

const HERE = dirname(fileURLToPath(import.meta.url));
const SECRET = process.env.AUTH_SECRET;
const HOMEROOM_URL = process.env.HOMEROOM_URL ?? "http://127.0.0.1:8787";
const PORT = Number(process.env.PORT ?? 5173);
const HOST = process.env.HOST ?? "127.0.0.1";
const TOKEN_TTL = Number(process.env.TOKEN_TTL ?? 600);

if (!SECRET) {
  console.error("server.mjs: set AUTH_SECRET to the homeroom deployment's secret");
  process.exit(2);
}

const FILES = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/app.js": ["app.js", "text/javascript; charset=utf-8"],
  "/app.js.map": ["app.js.map", "application/json"],
};

function send(res, status, type, body) {
  res.writeHead(status, { "Content-Type": type, "Cache-Control": "no-store" });
  res.end(body);
}

/**
 * A token for the asking user. A real app authenticates the request first
 * (its session cookie, say) and takes the user from there; this example
 * takes `?user=` at its word. `info` becomes the member's verified info,
 * shown to everyone in the room.
 */
async function token(url, res) {
  const user = url.searchParams.get("user") ?? "";
  const room = url.searchParams.get("room") ?? "";
  try {
    const token = await mintToken({ secret: SECRET, room, kind: "rooms", sub: user, ttl: TOKEN_TTL, info: { name: user } });
    send(res, 200, "application/json", JSON.stringify({ token }));
  } catch (e) {
    // mintToken names the bad claim (a user or room name the Worker would refuse).
    send(res, 400, "application/json", JSON.stringify({ error: e.message }));
  }
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  if (req.method !== "GET") return send(res, 405, "text/plain", "GET only\n");
  if (url.pathname === "/token") return token(url, res);
  const file = FILES[url.pathname];
  if (!file) return send(res, 404, "text/plain", "not found\n");
  try {
    let body = await readFile(join(HERE, file[0]), file[1].startsWith("text/html") ? "utf8" : undefined);
    if (typeof body === "string") body = body.replace("%HOMEROOM_URL%", HOMEROOM_URL.replace(/"/g, "&quot;"));
    send(res, 200, file[1], body);
  } catch {
    send(res, 404, "text/plain", `${file[0]} is missing: run npm run build\n`);
  }
});

server.listen(PORT, HOST, () => {
  console.log(`embed example on http://${HOST}:${server.address().port}/ (homeroom at ${HOMEROOM_URL})`);
});
