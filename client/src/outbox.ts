//! Outgoing frames: durable sends (publish/set) stay here, in order, until
//! acked, and are written again on every new connection (the room
//! deduplicates by (session, id)); a client-side token bucket keeps the
//! client under the room's rate limit so a burst never ends in 4029.

import type { Env, TimerHandle } from "./env.js";
import { HomeroomError } from "./errors.js";

export interface RateOptions {
  /** Frames that may go out at once. The room allows 50. */
  burst: number;
  /** Sustained frames per second. The room allows 20. */
  perSec: number;
}

export const DEFAULT_RATE: RateOptions = { burst: 40, perSec: 16 };

export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly env: Env,
    private readonly o: RateOptions,
  ) {
    this.tokens = o.burst;
    this.at = env.now();
  }

  private refill(): void {
    const now = this.env.now();
    this.tokens = Math.min(this.o.burst, this.tokens + ((now - this.at) / 1000) * this.o.perSec);
    this.at = now;
  }

  take(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Spends a token even when there is none (control frames must go out). */
  force(): void {
    this.refill();
    this.tokens -= 1;
  }

  /** Milliseconds until `take` can succeed. */
  wait(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.o.perSec) * 1000);
  }

  fill(): void {
    this.tokens = this.o.burst;
    this.at = this.env.now();
  }
}

interface Pending {
  text: string;
  resolve(seq: number): void;
  reject(err: HomeroomError): void;
}

export class Outbox {
  private pending = new Map<string, Pending>();
  private queue: string[] = [];
  private online = false;
  private timer: TimerHandle | null = null;
  readonly bucket: TokenBucket;

  constructor(
    private readonly env: Env,
    rate: RateOptions,
    /** Writes to the current socket. */
    private readonly write: (text: string) => void,
  ) {
    this.bucket = new TokenBucket(env, rate);
  }

  /** Unacked durable sends. */
  get size(): number {
    return this.pending.size;
  }

  /** Keeps a durable send until its ack; writes it now if connected. */
  add(id: string, text: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { text, resolve, reject });
      if (this.online) {
        this.queue.push(id);
        this.flush();
      }
    });
  }

  ack(id: string, seq: number): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    p.resolve(seq);
    return true;
  }

  fail(id: string, err: HomeroomError): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    this.queue = this.queue.filter((q) => q !== id);
    p.reject(err);
    return true;
  }

  /** A connection is ready: write every unacked send again, oldest first. */
  resume(): void {
    this.online = true;
    this.bucket.fill();
    this.queue = [...this.pending.keys()];
    this.flush();
  }

  /**
   * Writes every unacked send again on the same connection (after a
   * `rate_limited` error, whose frame the room did not identify).
   */
  rewrite(): void {
    if (!this.online) return;
    const queued = new Set(this.queue);
    for (const id of this.pending.keys()) if (!queued.has(id)) this.queue.push(id);
    this.flush();
  }

  /** The connection is gone: hold everything until `resume`. */
  pause(): void {
    this.online = false;
    this.queue = [];
    if (this.timer !== null) this.env.clearTimeout(this.timer);
    this.timer = null;
  }

  rejectAll(err: HomeroomError): void {
    this.pause();
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(err);
  }

  /** An ephemeral frame: written now if connected and under the rate, else dropped. */
  ephemeral(text: string): boolean {
    if (!this.online || !this.bucket.take()) return false;
    this.write(text);
    return true;
  }

  /** A control frame (presence, get_state): always written when connected. */
  control(text: string): boolean {
    if (!this.online) return false;
    this.bucket.force();
    this.write(text);
    return true;
  }

  private flush(): void {
    if (this.timer !== null) return; // a paced flush is already scheduled
    while (this.online && this.queue.length > 0) {
      if (!this.bucket.take()) {
        this.timer = this.env.setTimeout(() => {
          this.timer = null;
          this.flush();
        }, this.bucket.wait());
        return;
      }
      const id = this.queue.shift()!;
      const p = this.pending.get(id);
      if (p) this.write(p.text);
    }
  }
}
