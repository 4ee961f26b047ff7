//! One Room per (deployment, kind, room) within a tab, shared by every
//! component that uses it: counted holds, started by the first, closed a
//! grace period after the last lets go. The grace is what makes React
//! StrictMode's mount → unmount → mount (and a route change that unmounts
//! one user as it mounts the next) cost no second socket and no close/reopen
//! flap. Framework-free: the React hooks (react.ts) are a thin layer on it.

import type { ConnectOptions } from "./room.js";
import { Room } from "./room.js";

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** How long a room stays open after its last holder lets go, ms. */
export const DEFAULT_RELEASE_MS = 1000;

interface Entry {
  room: Room;
  holds: number;
  closing: unknown;
}

const entries = new Map<string, Entry>();

const pageTimers: Timers = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (h) => globalThis.clearTimeout(h as ReturnType<typeof globalThis.setTimeout>),
};

/** The identity of a shared room: where (url or regions, or the page's origin), which kind, which room. */
export function roomKey(o: Pick<ConnectOptions, "url" | "regions" | "kind" | "room">): string {
  const where = o.regions?.length ? o.regions.join(",") : (o.url ?? "");
  return JSON.stringify([where, o.kind ?? "rooms", o.room]);
}

/**
 * The shared room for `opts` if one is held or closing, else a new Room
 * that nobody shares yet (not started, not registered: safe to call while
 * rendering, on a server too).
 */
export function peekRoom(opts: ConnectOptions): Room {
  return entries.get(roomKey(opts))?.room ?? new Room(opts);
}

/** Rooms held or closing now (tests, diagnostics). */
export function sharedRooms(): number {
  return entries.size;
}

/**
 * Holds the shared room of `key`, registering `room` as it if there is
 * none, and starts it (a no-op while it runs; a room closed for good
 * starts again). Returns the shared room (another one, if someone
 * registered it first) and the release, which is safe to call twice.
 */
export function holdRoom(
  key: string,
  room: Room,
  opts: { releaseMs?: number; timers?: Timers } = {},
): { room: Room; release: () => void } {
  const timers = opts.timers ?? pageTimers;
  let entry = entries.get(key);
  if (!entry) {
    entry = { room, holds: 0, closing: null };
    entries.set(key, entry);
  }
  const e = entry;
  e.holds += 1;
  if (e.closing !== null) {
    timers.clearTimeout(e.closing);
    e.closing = null;
  }
  e.room.start();
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    e.holds -= 1;
    if (e.holds > 0) return;
    e.closing = timers.setTimeout(() => {
      e.closing = null;
      if (e.holds > 0 || entries.get(key) !== e) return;
      entries.delete(key);
      e.room.close();
    }, opts.releaseMs ?? DEFAULT_RELEASE_MS);
  };
  return { room: e.room, release };
}
