//! The connection status a Room reports: its type, the idle status of a
//! room not started yet (what server-side rendering shows), and the
//! comparison that keeps one frozen snapshot object until a field changes
//! (so `useSyncExternalStore` and other `===` checks see "no change").

import type { ChoiceWhy } from "./regions.js";

/** `idle`: made but not started (`autoConnect: false`, or rendering on a server). */
export type ConnectionState = "idle" | "connecting" | "open" | "reconnecting" | "closed";

export interface Status {
  state: ConnectionState;
  /** The endpoint of the current or last connection, and how it was chosen. */
  endpoint: string | null;
  endpointChoice: ChoiceWhy | null;
  /** From the last welcome: where this client connected, and the room's home. */
  region: string | null;
  home: string | null;
  user: string | null;
  conn: string | null;
  /** The highest seq applied, and the epoch of the room's log. */
  seq: number;
  epoch: string | null;
  /** Whether the last connect resumed, and how many messages it replayed. */
  resumed: boolean;
  missed: number;
  /** Failures in a row (reset by a connection that stays up 10 s). */
  attempt: number;
  /** When the next connect is due (epoch ms), while waiting to reconnect. */
  retryAt: number | null;
  /** The last close code and reason the client saw. */
  lastClose: Readonly<{ code: number; reason: string }> | null;
  /**
   * Why the connection is down or closed, in a word. Once closed: `closed`,
   * `superseded` (4001), `auth` (4401: no good token), `session_taken`
   * (4409 again and again), or a 4403 reason (`kicked`, `blocked`, ...).
   */
  why: string | null;
  /** The session this client connects with (changes after a 4409); "" until started. */
  session: string;
  /** Unacknowledged publishes and sets. */
  pending: number;
}

/** The status of a room that was never started (also the server-rendering snapshot). */
export const IDLE_STATUS: Readonly<Status> = Object.freeze({
  state: "idle",
  endpoint: null,
  endpointChoice: null,
  region: null,
  home: null,
  user: null,
  conn: null,
  seq: 0,
  epoch: null,
  resumed: false,
  missed: 0,
  attempt: 0,
  retryAt: null,
  lastClose: null,
  why: null,
  session: "",
  pending: 0,
});

/**
 * Whether two statuses say the same, field by field. `lastClose` is kept
 * frozen and replaced only by a new close, so identity tells a new close
 * from an old one, even with the same code and reason.
 */
export function sameStatus(a: Status, b: Status): boolean {
  for (const k of Object.keys(a) as Array<keyof Status>) if (a[k] !== b[k]) return false;
  return true;
}

/** A frozen copy of `s` (its `lastClose` is frozen already). */
export function frozenStatus(s: Status): Readonly<Status> {
  return Object.freeze({ ...s });
}
