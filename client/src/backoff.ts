//! When to reconnect: the close-code policy of PROTOCOL.md and full-jitter
//! exponential backoff. Pure functions of (cause, attempt, random).

import { CLOSE } from "./protocol.js";

export interface BackoffOptions {
  /** First backoff window, ms: delay = random(0, min(cap, base × 2^attempt)). */
  baseMs: number;
  /** Largest backoff window, ms. */
  capMs: number;
  /** Window for a prompt reconnect (after 1001, or after a seq gap), ms. */
  promptMs: number;
  /** After 4029: delay = abuseMinMs + random(0, abuseWindowMs). */
  abuseMinMs: number;
  abuseWindowMs: number;
  /**
   * A connection that stayed up this long resets the attempt count, ms. A
   * shorter one does not: a room that drops every client right after its
   * welcome (drain loop, gap loop) gets backoff, not a reconnect loop.
   */
  stableMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  baseMs: 2000,
  capMs: 20000,
  promptMs: 1000,
  abuseMinMs: 30000,
  abuseWindowMs: 30000,
  stableMs: 10000,
};

/** Why a connection ended. */
export type Cause =
  /** The socket closed with `code`; `welcomed` when it had got its welcome. */
  | { kind: "close"; code: number; reason?: string; welcomed: boolean }
  /** Two pongs missed in a row. */
  | { kind: "heartbeat" }
  /** A `message` skipped a seq: reconnect with resume to fetch the missing ones. */
  | { kind: "gap" }
  /** No open or no welcome in time. */
  | { kind: "timeout" }
  /** The connect itself failed (getToken threw, the URL was refused, ...). */
  | { kind: "error"; error: unknown };

export type Plan =
  | { reconnect: false; why: "closed" | "superseded" }
  | {
      reconnect: true;
      /** Milliseconds to wait before the next connect. */
      delay: number;
      /** The attempt number to use for the failure after this one. */
      attempt: number;
      /** Ask `getToken` for a fresh token before connecting. */
      refreshToken: boolean;
    };

/** Full jitter: uniform in [0, min(cap, base × 2^attempt)). */
export function fullJitter(attempt: number, random: () => number, o: BackoffOptions = DEFAULT_BACKOFF): number {
  const window = Math.min(o.capMs, o.baseMs * 2 ** Math.min(attempt, 30));
  return random() * window;
}

/**
 * What to do after `cause`, given how many failures in a row came before it
 * (`attempt`, reset to 0 by a connection that stayed up `stableMs`). Every path that reconnects draws
 * its delay from `random`, so no two clients share a timer.
 */
export function plan(cause: Cause, attempt: number, random: () => number, o: BackoffOptions = DEFAULT_BACKOFF): Plan {
  const next = attempt + 1;
  const backoff = (refreshToken = false): Plan => ({
    reconnect: true,
    delay: fullJitter(attempt, random, o),
    attempt: next,
    refreshToken,
  });
  // A prompt reconnect only when the last connection was healthy: a room that
  // drains or gaps again and again falls back to backoff.
  const prompt = (): Plan =>
    attempt === 0 ? { reconnect: true, delay: random() * o.promptMs, attempt: next, refreshToken: false } : backoff();

  switch (cause.kind) {
    case "gap":
      return prompt();
    case "heartbeat":
    case "timeout":
    case "error":
      return backoff();
    case "close":
      switch (cause.code) {
        case CLOSE.NORMAL:
          return { reconnect: false, why: "closed" };
        case CLOSE.SUPERSEDED:
          return { reconnect: false, why: "superseded" };
        case CLOSE.GOING_AWAY:
          return cause.welcomed ? prompt() : backoff();
        case CLOSE.POLICY:
          return backoff(true);
        case CLOSE.RATE_ABUSE:
          return {
            reconnect: true,
            delay: o.abuseMinMs + random() * o.abuseWindowMs,
            attempt: next,
            refreshToken: false,
          };
        default:
          // 1006 and every other code (1009, 1011, 4008, ...).
          return backoff();
      }
  }
}
