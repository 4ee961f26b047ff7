//! mintToken(): a known-answer vector (fixed exp and iat) cross-checked
//! against node:crypto's HMAC, the structure of what it mints, and the
//! claims it refuses the way the Worker would.

import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { describe, it } from "node:test";

import { tokenExpired } from "../src/room.js";
import { mintToken } from "../src/token.js";

const SECRET = "homeroom-test-secret-0123456789ab"; // 33 bytes, as src/auth/jwt.rs's tests use

/** The token the Rust side pins (src/auth/jwt.rs `mint` makes the same bytes for these claims). */
const VECTOR = {
  options: { secret: SECRET, room: "r1", kind: "rooms", sub: "alice", exp: 1_764_460_060, iat: 1_764_460_000 },
  /** header.payload. (the signature is checked against node:crypto, then pinned) */
  signed:
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJyb29tIjoicjEiLCJraW5kIjoicm9vbXMiLCJzdWIiOiJhbGljZSIsImV4cCI6MTc2NDQ2MDA2MCwiaWF0IjoxNzY0NDYwMDAwfQ.",
  signature: "UVgQNpmIyjiyRTbrBHXTphOxDQzj2kiXD-Kkj8EaV6U",
};

const decode = (part: string): unknown => JSON.parse(Buffer.from(part, "base64url").toString("utf8"));

/** HS256 over `header.payload` with node:crypto: an independent implementation. */
function nodeSign(signed: string, secret: string): string {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(signed, "utf8").digest("base64url");
}

describe("mintToken", () => {
  it("known answer: the fixed claims give the pinned header and payload, signed as node:crypto signs them", async () => {
    const token = await mintToken(VECTOR.options);
    const [h, p, s] = token.split(".");
    assert.equal(`${h}.${p}.`, VECTOR.signed, "header and payload bytes");
    assert.equal(s, nodeSign(`${h}.${p}`, SECRET));
    assert.equal(s, VECTOR.signature);
  });

  it("mints a structurally valid JWT: three base64url parts, the header, the claims in order, no padding", async () => {
    const before = Math.floor(Date.now() / 1000);
    const token = await mintToken({ secret: SECRET, room: "auction:*", kind: ["auction", "chat"], sub: "bob@example.com", ttl: 600, nbf: before, info: { name: "Bob", roles: ["bidder"] }, kid: "k2" });
    const parts = token.split(".");
    assert.equal(parts.length, 3);
    for (const part of parts) assert.match(part, /^[A-Za-z0-9_-]+$/);
    assert.deepEqual(decode(parts[0]!), { alg: "HS256", kid: "k2", typ: "JWT" });
    assert.equal(Buffer.from(parts[0]!, "base64url").toString(), '{"alg":"HS256","kid":"k2","typ":"JWT"}', "the Worker's header key order");
    const claims = decode(parts[1]!) as Record<string, unknown>;
    assert.deepEqual(Object.keys(claims), ["room", "kind", "sub", "exp", "nbf", "iat", "info"]);
    assert.equal(claims.room, "auction:*");
    assert.deepEqual(claims.kind, ["auction", "chat"]);
    assert.equal(claims.sub, "bob@example.com");
    assert.ok((claims.iat as number) >= before && (claims.iat as number) <= before + 5);
    assert.equal(claims.exp, (claims.iat as number) + 600);
    assert.deepEqual(claims.info, { name: "Bob", roles: ["bidder"] });
    assert.equal(parts[2], nodeSign(`${parts[0]}.${parts[1]}`, SECRET));
    assert.equal(Buffer.from(parts[2]!, "base64url").length, 32);
    assert.equal(tokenExpired(token, Date.now()), false, "the client reads a JWT's exp");
    assert.equal(tokenExpired(token, ((claims.exp as number) - 10) * 1000), true, "within 30 s of exp");
    // Another secret gives another signature.
    const other = await mintToken({ secret: SECRET + "x", room: "r1", kind: "rooms", sub: "a", exp: 1_764_460_060, iat: 1 });
    const same = await mintToken({ secret: SECRET, room: "r1", kind: "rooms", sub: "a", exp: 1_764_460_060, iat: 1 });
    assert.notEqual(other.split(".")[2], same.split(".")[2]);
    assert.equal(other.split(".")[1], same.split(".")[1]);
  });

  it("takes the key as bytes too", async () => {
    const bytes = new TextEncoder().encode(SECRET);
    assert.equal(await mintToken({ ...VECTOR.options, secret: bytes }), await mintToken(VECTOR.options));
  });

  it("refuses what the Worker would refuse, saying which option is wrong", async () => {
    const ok = { secret: SECRET, room: "r1", kind: "rooms", sub: "alice" };
    const refused = async (o: object, re: RegExp) => assert.rejects(mintToken({ ...ok, ...o }), (e: unknown) => e instanceof TypeError && re.test(e.message));
    await refused({ secret: "x".repeat(31) }, /at least 32 bytes/);
    await refused({ sub: "" }, /sub must be/);
    await refused({ sub: "a".repeat(65) }, /sub must be/);
    await refused({ sub: "al ice" }, /sub must be/);
    await refused({ sub: "a/b" }, /sub must be/);
    await refused({ room: "" }, /room must be/);
    await refused({ room: ".." }, /room must be/);
    await refused({ room: "a*b*" }, /room must be/);
    await refused({ room: "a/b" }, /room must be/);
    await refused({ ttl: 60, exp: 2_000_000_000 }, /ttl or exp/);
    await refused({ ttl: 0 }, /ttl must be/);
    await refused({ ttl: 1.5 }, /ttl must be/);
    await refused({ exp: -1 }, /exp must be/);
    await refused({ ttl: 86_401 }, /at most 86400 s/);
    await refused({ info: [1] }, /info must be a JSON object/);
    await refused({ info: { bio: "x".repeat(1_100) } }, /at most 1024 bytes/);
    let deep: unknown = {};
    for (let i = 0; i < 32; i++) deep = { d: deep };
    await refused({ info: deep }, /nest at most 32/);
    await refused({ kid: "" }, /kid must be/);
    // A token opens the kinds it names: one it must name.
    await refused({ kind: undefined }, /kind must be/);
    await refused({ kind: "" }, /kind must be/);
    await refused({ kind: "a/b" }, /kind must be/);
    await refused({ kind: [] }, /kind must be/);
    await refused({ kind: Array.from({ length: 17 }, (_, i) => `k${i}`) }, /kind must be/);
    // The edges that are fine.
    for (const o of [{ room: "*" }, { room: "lobby:*" }, { kind: "*" }, { kind: ["chat", "auction"] }, { sub: "auth0|abc+1@x.io:y_z-" }, { ttl: 86_400 }, { info: { bio: "x".repeat(1_000) } }]) {
      assert.equal((await mintToken({ ...ok, ...o })).split(".").length, 3, JSON.stringify(o).slice(0, 40));
    }
  });
});
