//! Identities the client makes up: the tab's session (kept in
//! sessionStorage so a reload resumes) and the client ids of durable sends.

import type { Env, LocksLike } from "./env.js";

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

/** What a claim of a session found: this page has it for the room now; another tab holds it; or
 *  another Room of this page has the same room under it. */
export type Claim = "mine" | "other-tab" | "this-page" | "gone";

/** One page's claims (per lock manager: a page has one). */
interface PageClaims {
  /** Whether the page got each session's lock (held until the page goes). */
  locked: Map<string, Promise<boolean>>;
  /** The rooms (`kind/room`) each session the page holds is used for by a Room now. */
  rooms: Map<string, Set<string>>;
  /** A session another tab held, and the fresh one this page took instead (shared by its Rooms). */
  replaced: Map<string, string>;
}

const pages = new WeakMap<LocksLike, PageClaims>();

/** How long a held session's lock is waited for once before this tab takes another (ms). */
const RETRY_MS = 150;

function pageOf(locks: LocksLike): PageClaims {
  let page = pages.get(locks);
  if (!page) pages.set(locks, (page = { locked: new Map(), rooms: new Map(), replaced: new Map() }));
  return page;
}

/**
 * Claims `session` for `room` (`kind/room`) in this page: its lock, named after it, held until
 * the page goes. A duplicated tab copies sessionStorage, so without this two tabs connected
 * with one session, and the room closed the older 4001 (superseded), for good. `"gone"`: the
 * claimer was no longer `wanted` once the lock was settled, and holds nothing. Never throws: a
 * lock manager that fails counts as a claim granted (as without one).
 */
export async function claimSession(
  locks: LocksLike,
  session: string,
  room: string,
  env: Env,
  wanted: () => boolean = () => true,
): Promise<Claim> {
  const page = pageOf(locks);
  let locked = page.locked.get(session);
  if (!locked) {
    const ask = (): Promise<boolean> =>
      new Promise<boolean>((resolve) => {
        locks
          .request(`homeroom.session.${session}`, { ifAvailable: true }, (lock) => {
            resolve(lock !== null);
            // Held for the page's life: the tab keeps its session.
            return lock === null ? undefined : new Promise(() => {});
          })
          .catch(() => resolve(true));
      });
    // Held: asked once more a moment later, for a reload whose old page has not let its
    // locks go yet (a reload keeps its session; only another tab's is another's).
    const later = (): Promise<boolean> => new Promise((resolve) => env.setTimeout(() => resolve(ask()), RETRY_MS));
    locked = ask().then((got) => got || later());
    page.locked.set(session, locked);
  }
  if (!(await locked)) return "other-tab";
  // A Room closed while it waited takes nothing (React's StrictMode closes one at once).
  if (!wanted()) return "gone";
  const rooms = page.rooms.get(session) ?? new Set<string>();
  page.rooms.set(session, rooms);
  if (rooms.has(room)) return "this-page";
  rooms.add(room);
  return "mine";
}

/** The fresh session this page took for `session` another tab holds (one for all its Rooms). */
export function replacedSession(locks: LocksLike, session: string, make: () => string): string {
  const page = pageOf(locks);
  let fresh = page.replaced.get(session);
  if (fresh === undefined) page.replaced.set(session, (fresh = make()));
  return fresh;
}

/** A Room of this page no longer uses `session` for `room` (closed). */
export function releaseSession(locks: LocksLike, session: string, room: string): void {
  pages.get(locks)?.rooms.get(session)?.delete(room);
}
