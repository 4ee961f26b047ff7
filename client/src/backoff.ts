//! When to reconnect: the close-code policy of PROTOCOL.md and full-jitter
//! exponential backoff. Pure functions of (cause, attempt, random).

import { CLOSE } from "./protocol.js";

export interface BackoffOptions {
  /** First backoff window, ms: delay = random(0, min(cap, base × 2^attempt)). */
  baseMs: number;
  /** Largest backoff window, ms. */
  capMs: number;
  /** Window for a prompt reconnect (after 1001, 4013, 4401, 4409, or a seq gap), ms. */
  promptMs: number;
  /** After 4029 or 4429: delay = abuseMinMs + random(0, abuseWindowMs). */
  abuseMinMs: number;
  abuseWindowMs: number;
  /**
   * 4401 closes (token refused) in a row, with no welcome in between, that
   * stop the client for good (`why: "auth"`). `connect({ maxAuthRefusals })`.
   */
  maxAuthRefusals: number;
  /** 4409 closes (session taken) in a row, with no welcome in between, that stop the client. */
  maxSessionTaken: number;
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
  maxAuthRefusals: 3,
  maxSessionTaken: 3,
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

/**
 * What the client knows besides the cause: whether it can replace a refused
 * token, and how many refusals of a kind came in a row.
 */
export interface PlanContext {
  /** `getToken` was given: a refused token can be replaced. */
  canRefreshToken: boolean;
  /** 4401 closes since the last welcome, this one included. */
  authRefusals: number;
  /** 4409 closes since the last welcome, this one included. */
  sessionTaken: number;
  /**
   * The room's reconnect window (`spreadMs`): after a close that drops a
   * room's members together (1001, 1012) of a connection that had its
   * welcome, the first reconnect waits uniformly in [0, max(its own window,
   * this)), so a big room's members come back at the room's pace.
   */
  spreadMs: number;
}

const DEFAULT_CONTEXT: PlanContext = { canRefreshToken: false, authRefusals: 1, sessionTaken: 1, spreadMs: 0 };

/** The widest window a room can ask a reconnect to be spread over, ms. */
export const SPREAD_MAX_MS = 60000;

/**
 * The window a room of `members` asks its members to spread a reconnect
 * over when it drops them together, at `rate` connects per second (the
 * welcome's `limits.reconnect_rate`): members / rate seconds, at most
 * `SPREAD_MAX_MS`. The arrivals at the room are then at most `rate` per
 * second, however many members it has (the seeds' peak = population /
 * window); 0 for a room too small to need it.
 */
export function spreadMs(members: number, rate: number): number {
  if (!(members > 0) || !(rate > 0)) return 0;
  return Math.min(SPREAD_MAX_MS, (members * 1000) / rate);
}

/**
 * Why the client stopped for good: `closed` (1000), `superseded` (4001),
 * `auth` (4401 and no way to a good token), `session_taken` (4409 loop),
 * `room_deleted` or `no_such_kind` (4404: the room is gone, or the Worker
 * serves no such kind of room), or the reason of a 4403 (`kicked`,
 * `blocked`, ...; `forbidden` when empty).
 */
export type StopWhy =
  | "closed"
  | "superseded"
  | "auth"
  | "session_taken"
  | "room_deleted"
  | "no_such_kind"
  | "kicked"
  | "blocked"
  | (string & {});

export type Plan =
  | { reconnect: false; why: StopWhy }
  | {
      reconnect: true;
      /** Milliseconds to wait before the next connect. */
      delay: number;
      /** The attempt number to use for the failure after this one. */
      attempt: number;
      /** Ask `getToken` for a fresh token before connecting. */
      refreshToken: boolean;
      /** Connect with a fresh random session id (the old one belongs to another user). */
      newSession: boolean;
    };

/** Full jitter: uniform in [0, min(cap, base × 2^attempt)). */
export function fullJitter(attempt: number, random: () => number, o: BackoffOptions = DEFAULT_BACKOFF): number {
  const window = Math.min(o.capMs, o.baseMs * 2 ** Math.min(attempt, 30));
  return random() * window;
}

/**
 * What to do after `cause`, given how many failures in a row came before it
 * (`attempt`, reset to 0 by a connection that stayed up `stableMs`) and the
 * refusal streaks in `ctx`. Every path that reconnects draws its delay from
 * `random`, so no two clients share a timer.
 */
export function plan(
  cause: Cause,
  attempt: number,
  random: () => number,
  o: BackoffOptions = DEFAULT_BACKOFF,
  ctx: Partial<PlanContext> = {},
): Plan {
  const c: PlanContext = { ...DEFAULT_CONTEXT, ...ctx };
  const next = attempt + 1;
  const again = (delay: number, refreshToken = false, newSession = false): Plan => ({
    reconnect: true,
    delay,
    attempt: next,
    refreshToken,
    newSession,
  });
  const backoff = (refreshToken = false, newSession = false): Plan =>
    again(fullJitter(attempt, random, o), refreshToken, newSession);
  // A prompt reconnect only when the last connection was healthy: a room that
  // drains or gaps again and again falls back to backoff.
  const prompt = (): Plan => (attempt === 0 ? again(random() * o.promptMs) : backoff());
  // After a refusal the client fixes (a new token, a new session): prompt
  // while every failure since the last healthy connection was one of this
  // streak (at most `max` of them), backoff when other trouble came first.
  const promptFixed = (streak: number, refreshToken: boolean, newSession: boolean): Plan =>
    attempt < streak ? again(random() * o.promptMs, refreshToken, newSession) : backoff(refreshToken, newSession);
  const long = (): Plan => again(o.abuseMinMs + random() * o.abuseWindowMs);
  // The room dropped everyone at once: the first reconnect of a healthy connection is spread
  // over the room's window (later attempts back off as usual, already wider).
  const together = (welcomed: boolean, own: () => Plan, window: number): Plan =>
    welcomed && attempt === 0 && c.spreadMs > window ? again(random() * c.spreadMs) : own();

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
          return together(cause.welcomed, () => (cause.welcomed ? prompt() : backoff()), o.promptMs);
        case CLOSE.SERVICE_RESTART:
          // A relay restarted under its clients: all of them come back at once.
          return together(cause.welcomed, backoff, Math.min(o.capMs, o.baseMs));
        case CLOSE.BACKLOG:
          // Fell behind: resume from what was applied, at once unless it repeats.
          return prompt();
        case CLOSE.POLICY:
          return backoff(true);
        case CLOSE.UNAUTHORIZED:
          if (!c.canRefreshToken || c.authRefusals >= o.maxAuthRefusals) return { reconnect: false, why: "auth" };
          return promptFixed(c.authRefusals, true, false);
        case CLOSE.FORBIDDEN:
          return { reconnect: false, why: cause.reason ? cause.reason : "forbidden" };
        case CLOSE.ROOM_DELETED:
          // `room_deleted`, or `no_such_kind` (the Worker serves no such kind of room).
          return { reconnect: false, why: cause.reason ? cause.reason : "room_deleted" };
        case CLOSE.SESSION_TAKEN:
          if (c.sessionTaken >= o.maxSessionTaken) return { reconnect: false, why: "session_taken" };
          return promptFixed(c.sessionTaken, false, true);
        case CLOSE.RATE_ABUSE:
        case CLOSE.TOO_MANY_CONNECTIONS:
          return long();
        default:
          // 1006 and every other code (1009, 1011, 4008, ...).
          return backoff();
      }
  }
}
