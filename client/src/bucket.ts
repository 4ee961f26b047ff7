//! The client's token bucket and the pace it keeps: a share of the limits
//! the room announces in `welcome` (per connection, and per user over all of
//! that user's connections), so that nothing the client writes is ever
//! refused with `rate_limited` or ends in 4029.

import type { Env } from "./env.js";
import type { Limits } from "./protocol.js";

export interface RateOptions {
  /**
   * The share of the room's limits the client uses, in (0, 1]. The rest is
   * headroom for network jitter, which can deliver frames sent apart in
   * one bunch. Default 0.8.
   */
  headroom: number;
  /** An upper bound of the client's own on the burst (frames). Default: none. */
  burst: number;
  /** An upper bound of the client's own on frames per second. Default: none. */
  perSec: number;
  /** Least time between two presence frames, ms (latest wins). Default 100. */
  presenceIntervalMs: number;
  /** Least time between two signals of one topic, ms (latest wins). Default 50. */
  signalIntervalMs: number;
}

export const DEFAULT_RATE: RateOptions = {
  headroom: 0.8,
  burst: Infinity,
  perSec: Infinity,
  presenceIntervalMs: 100,
  signalIntervalMs: 50,
};

/** What the bucket runs at. */
export interface Pace {
  /** Frames per second. */
  perSec: number;
  /** Frames that may go at once. */
  burst: number;
  /**
   * Tokens ephemeral frames leave alone when no durable send waits, so a
   * publish made during a cursor storm goes out at once.
   */
  reserve: number;
}

/**
 * The pace for `limits` when `sharers` connections of this user are in the
 * room (they share the user's budget; each takes an equal part of it).
 */
export function paceFor(limits: Pick<Limits, "rate" | "burst" | "user_rate" | "user_burst">, o: RateOptions, sharers = 1): Pace {
  const n = Math.max(1, Math.floor(sharers));
  const h = Math.min(1, Math.max(0.01, o.headroom));
  const perSec = Math.max(0.01, Math.min(o.perSec, h * Math.min(limits.rate, limits.user_rate / n)));
  const burst = Math.max(1, Math.floor(Math.min(o.burst, h * Math.min(limits.burst, limits.user_burst / n))));
  return { perSec, burst, reserve: Math.floor(burst / 5) };
}

/**
 * The pace of this user's bytes (one token a byte) for `limits` when `sharers` connections
 * of theirs are in the room: each takes an equal part of the user's byte budget.
 */
export function bytePaceFor(limits: Pick<Limits, "user_bytes_per_sec" | "user_bytes_burst">, o: RateOptions, sharers = 1): Pace {
  const n = Math.max(1, Math.floor(sharers));
  const h = Math.min(1, Math.max(0.01, o.headroom));
  const perSec = Math.max(1, (h * limits.user_bytes_per_sec) / n);
  const burst = Math.max(1, Math.floor((h * limits.user_bytes_burst) / n));
  return { perSec, burst, reserve: 0 };
}

/**
 * A token bucket refilled continuously, as the room's is. It starts full
 * and is never refilled by a reconnect: the room's per-user budget does
 * not start over with a new connection, so neither does the client's.
 */
export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly env: Env,
    private pace: Pace,
  ) {
    this.tokens = pace.burst;
    this.at = env.now();
  }

  get current(): Pace {
    return this.pace;
  }

  /** Tokens held now. */
  get level(): number {
    this.refill();
    return this.tokens;
  }

  /** Runs at `pace` from now on (what was refilled so far at the old pace). */
  setPace(pace: Pace): void {
    this.refill();
    this.pace = pace;
    this.tokens = Math.min(this.tokens, pace.burst);
  }

  private refill(): void {
    const now = this.env.now();
    if (now > this.at) this.tokens = Math.min(this.pace.burst, this.tokens + ((now - this.at) / 1000) * this.pace.perSec);
    this.at = Math.max(this.at, now);
  }

  /**
   * Takes `n` tokens if there are that many. `n` over the burst goes once the bucket is full,
   * and takes all `n`, into debt (the room charges the whole frame): what follows waits for it.
   */
  take(n = 1): boolean {
    this.refill();
    if (this.tokens < Math.min(n, this.pace.burst)) return false;
    this.tokens -= n;
    return true;
  }

  /** Milliseconds until the bucket holds `n` tokens (0: now). */
  wait(n = 1): number {
    this.refill();
    const want = Math.min(n, this.pace.burst);
    return this.tokens >= want ? 0 : Math.ceil(((want - this.tokens) / this.pace.perSec) * 1000);
  }
}
