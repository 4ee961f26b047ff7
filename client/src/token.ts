//! `mintToken()`: a room token as the Worker verifies it (an HS256 JWT, see
//! src/auth/), signed with WebCrypto only, so it runs unchanged in Node ≥ 20,
//! Deno, Bun and Workers: your backend's token endpoint. It checks the claims
//! as the Worker does and says which one is wrong, instead of minting a
//! token the Worker would refuse with a bare `token_malformed`.

import { byteLength, jsonDepth } from "./json.js";

export interface MintOptions {
  /** The deployment's `AUTH_SECRET` (its UTF-8 bytes are the key), or the key bytes. At least 32 bytes. */
  secret: string | Uint8Array;
  /** A room name, `"*"` for every room, or a prefix ending in `*` (`"auction:*"`). */
  room: string;
  /**
   * The kind of room the token opens (the path segment before the room:
   * `"chat"` opens `/chat/{room}/...`), a list of kinds, or `"*"` for every
   * kind. Required: the Worker refuses a token without one
   * (`token_wrong_kind`) unless the deployment is in the transition
   * (`ALLOW_TOKENS_WITHOUT_KIND`).
   */
  kind: string | string[];
  /** The user: 1-64 characters of `A-Z a-z 0-9 . _ - : @ + |`. */
  sub: string;
  /** Lifetime from now, seconds (default 3600). Not with `exp`. */
  ttl?: number;
  /** Expiry, unix seconds, instead of `ttl`. */
  exp?: number;
  /** Not before, unix seconds. */
  nbf?: number;
  /** Issued at, unix seconds (default: now; pass it with `exp` for a reproducible token). */
  iat?: number;
  /** Verified facts about the user (a JSON object of at most 1 KiB): the member's `info`, the rules' `who.info`. */
  info?: Record<string, unknown>;
  /** The key id of `secret` (`AUTH_SECRET_KID`), put in the header. */
  kid?: string;
  /**
   * The longest lifetime the deployment accepts (its `TOKEN_MAX_TTL_SECS`),
   * seconds; default 86400. A token living longer is refused here.
   */
  maxTtl?: number;
}

const USER_RE = /^[A-Za-z0-9._\-:@+|]{1,64}$/;
const ROOM_RE = /^[A-Za-z0-9._:-]{1,64}$/;
const MIN_SECRET_BYTES = 32;
const MAX_INFO_BYTES = 1024;
const MAX_DEPTH = 32;

/** Whether `room` may be a token's `room` claim (src/auth/mod.rs `valid_room_claim`). */
export function validRoomClaim(room: string): boolean {
  if (room === "*") return true;
  if (room.endsWith("*")) {
    const prefix = room.slice(0, -1);
    return !prefix.includes("*") && validRoomName(prefix + "x");
  }
  return validRoomName(room);
}

function validRoomName(name: string): boolean {
  return ROOM_RE.test(name) && name !== "." && name !== "..";
}

const KIND_RE = /^[A-Za-z0-9._-]{1,64}$/;
const MAX_KINDS = 16;

/** Whether `kind` may be a token's `kind` claim (src/auth/mod.rs `valid_kind_claim`). */
export function validKindClaim(kind: unknown): boolean {
  const one = (k: unknown) => typeof k === "string" && (k === "*" || KIND_RE.test(k));
  if (Array.isArray(kind)) return kind.length >= 1 && kind.length <= MAX_KINDS && kind.every(one);
  return one(kind);
}

/** Whether `sub` may be a token's user (src/auth/mod.rs `valid_user`). */
export function validUser(sub: string): boolean {
  return USER_RE.test(sub);
}

function seconds(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new TypeError(`mintToken: ${name} must be a non-negative integer of unix seconds`);
  }
  return v;
}

function b64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const utf8 = (s: string): Uint8Array<ArrayBuffer> => new Uint8Array(new TextEncoder().encode(s));

/**
 * An HS256 JWT for `room` and `sub`: header `{"alg":"HS256","typ":"JWT"}`
 * (`{"alg":"HS256","kid":…,"typ":"JWT"}` with a kid), claims in the order
 * room, kind, sub, exp, nbf, iat, info (the bytes the Worker's own `mint` makes).
 * Throws a `TypeError` naming the bad option.
 */
export async function mintToken(o: MintOptions): Promise<string> {
  const given: unknown = o.secret;
  const key = typeof given === "string" ? utf8(given) : given instanceof Uint8Array ? new Uint8Array(given) : null;
  if (key === null || key.length < MIN_SECRET_BYTES) {
    throw new TypeError(`mintToken: the secret must be at least ${MIN_SECRET_BYTES} bytes (the Worker refuses a shorter AUTH_SECRET)`);
  }
  if (typeof o.sub !== "string" || !validUser(o.sub)) {
    throw new TypeError("mintToken: sub must be 1-64 characters of A-Z a-z 0-9 . _ - : @ + |");
  }
  if (typeof o.room !== "string" || !validRoomClaim(o.room)) {
    throw new TypeError("mintToken: room must be a room name (1-64 of A-Z a-z 0-9 . _ : -), '*', or a prefix ending in *");
  }
  if (!validKindClaim(o.kind)) {
    throw new TypeError(
      `mintToken: kind must be the kind of room the token opens (its path segment, e.g. "chat"), a list of at most ${MAX_KINDS} kinds, or "*"`,
    );
  }
  if (o.ttl !== undefined && o.exp !== undefined) throw new TypeError("mintToken: give ttl or exp, not both");
  const now = Math.floor(Date.now() / 1000);
  const iat = o.iat === undefined ? now : seconds("iat", o.iat);
  let exp: number;
  if (o.exp !== undefined) {
    exp = seconds("exp", o.exp);
  } else {
    const ttl = o.ttl ?? 3600;
    if (!Number.isSafeInteger(ttl) || ttl <= 0) throw new TypeError("mintToken: ttl must be a positive integer of seconds");
    exp = now + ttl;
  }
  const maxTtl = o.maxTtl ?? 86_400;
  if (exp - now > maxTtl) {
    throw new TypeError(`mintToken: the token would live ${exp - now} s; the deployment accepts at most ${maxTtl} s (TOKEN_MAX_TTL_SECS; pass maxTtl if yours allows more)`);
  }
  const claims: Record<string, unknown> = { room: o.room, kind: o.kind, sub: o.sub, exp };
  if (o.nbf !== undefined) claims.nbf = seconds("nbf", o.nbf);
  claims.iat = iat;
  if (o.info !== undefined) {
    if (typeof o.info !== "object" || o.info === null || Array.isArray(o.info)) {
      throw new TypeError("mintToken: info must be a JSON object");
    }
    const text = JSON.stringify(o.info);
    if (byteLength(text) > MAX_INFO_BYTES) throw new TypeError(`mintToken: info must be at most ${MAX_INFO_BYTES} bytes of JSON (it is ${byteLength(text)})`);
    if (jsonDepth(text) > MAX_DEPTH) throw new TypeError(`mintToken: info must nest at most ${MAX_DEPTH} deep`);
    claims.info = o.info;
  }
  let header: Record<string, string> = { alg: "HS256", typ: "JWT" };
  if (o.kid !== undefined) {
    if (typeof o.kid !== "string" || o.kid.length < 1 || o.kid.length > 256) throw new TypeError("mintToken: kid must be 1-256 characters");
    header = { alg: "HS256", kid: o.kid, typ: "JWT" };
  }
  const signed = `${b64url(utf8(JSON.stringify(header)))}.${b64url(utf8(JSON.stringify(claims)))}`;
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new TypeError("mintToken: no WebCrypto here (globalThis.crypto.subtle)");
  const hmac = await subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const sig = new Uint8Array(await subtle.sign("HMAC", hmac, utf8(signed)));
  return `${signed}.${b64url(sig)}`;
}
