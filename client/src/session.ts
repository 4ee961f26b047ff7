//! Identities the client makes up: the tab's session (kept in
//! sessionStorage so a reload resumes) and the client ids of durable sends.

import type { Env } from "./env.js";

export const SESSION_KEY = "homeroom.session";
const SESSION_RE = /^[A-Za-z0-9_-]{8,64}$/;
const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

export function validSession(s: unknown): s is string {
  return typeof s === "string" && SESSION_RE.test(s);
}

/** `n` random characters of [0-9a-z] from the environment's unguessable bytes. */
export function randomText(env: Env, n: number): string {
  const bytes = env.randomBytes(new Uint8Array(n));
  let out = "";
  for (const b of bytes) out += ALPHABET[b % 36];
  return out;
}

/**
 * The session of this tab: the one given, else the one in sessionStorage,
 * else a new one (stored for the next load). A session is a capability in
 * anonymous mode (whoever knows it can supersede it), so it is unguessable.
 */
export function tabSession(env: Env, given?: string): string {
  if (given !== undefined) {
    if (!validSession(given)) throw new TypeError("homeroom: session must be 8-64 chars of A-Z a-z 0-9 _ -");
    return given;
  }
  const stored = safeGet(env, SESSION_KEY);
  if (validSession(stored)) return stored;
  return freshSession(env, true);
}

/**
 * A new random session, never `old`: for a new tab, or for a tab whose
 * session turned out to belong to another user (4409). Stored in
 * sessionStorage when `stored` (the tab's session lives there), so a reload
 * keeps it.
 */
export function freshSession(env: Env, stored: boolean, old?: string): string {
  let fresh: string;
  do fresh = "s-" + randomText(env, 20);
  while (fresh === old);
  if (stored) {
    try {
      env.sessionStorage?.setItem(SESSION_KEY, fresh);
    } catch {
      // storage full or blocked: the session lasts as long as the page
    }
  }
  return fresh;
}

function safeGet(env: Env, key: string): string | null {
  try {
    return env.sessionStorage?.getItem(key) ?? null;
  } catch {
    return null;
  }
}

/**
 * Client ids for publish/set: unique per session, also across reloads of the
 * tab (same session, counter back at 0), hence the random part.
 */
export class IdMaker {
  private counter = 0;
  /** Drawn at the first id (building a Room reads no randomness). */
  private prefix: string | null = null;

  constructor(private readonly env: Env) {}

  /** Draws the random part now (a Room does at start), if not drawn yet. */
  prime(): void {
    this.prefix ??= randomText(this.env, 8);
  }

  next(): string {
    this.counter += 1;
    this.prime();
    return `${this.prefix}-${this.counter.toString(36)}`;
  }
}
