//! Liveness of an open socket: an exact `{"type":"ping"}` every 30 s; a ping
//! whose pong has not come within 35 s is a miss; two misses in a row mean
//! the socket is dead even if the browser still calls it open. A page that
//! wakes up (back online, visible again) checks at once: a ping whose pong
//! must come within 5 s, since a laptop's sleep can kill a socket silently.

import type { Env, TimerHandle } from "./env.js";

export interface HeartbeatOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Misses in a row that declare the socket dead. */
  maxMisses: number;
  /** After a wake-up: the pong of the check ping must come within this, ms. */
  wakeTimeoutMs: number;
}

export const DEFAULT_HEARTBEAT: HeartbeatOptions = { intervalMs: 30_000, timeoutMs: 35_000, maxMisses: 2, wakeTimeoutMs: 5_000 };

export class Heartbeat {
  private tick: TimerHandle | null = null;
  private deadlines = new Set<TimerHandle>();
  private misses = 0;
  private running = false;
  private check: TimerHandle | null = null;

  constructor(
    private readonly env: Env,
    private readonly o: HeartbeatOptions,
    private readonly ping: () => void,
    private readonly dead: () => void,
  ) {}

  start(): void {
    this.stop();
    this.running = true;
    this.misses = 0;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    if (this.check !== null) this.env.clearTimeout(this.check);
    this.check = null;
    if (this.tick !== null) this.env.clearTimeout(this.tick);
    this.tick = null;
    for (const d of this.deadlines) this.env.clearTimeout(d);
    this.deadlines.clear();
  }

  /** A pong arrived: the socket is alive, every outstanding ping is answered. */
  pong(): void {
    this.misses = 0;
    if (this.check !== null) this.env.clearTimeout(this.check);
    this.check = null;
    for (const d of this.deadlines) this.env.clearTimeout(d);
    this.deadlines.clear();
  }

  /** The page woke up: a ping now, and the socket is dead unless its pong comes within `wakeTimeoutMs`. */
  checkNow(): void {
    if (!this.running || this.check !== null) return;
    this.ping();
    this.check = this.env.setTimeout(() => {
      this.check = null;
      if (!this.running) return;
      this.stop();
      this.dead();
    }, this.o.wakeTimeoutMs);
  }

  private schedule(): void {
    this.tick = this.env.setTimeout(() => {
      if (!this.running) return;
      this.ping();
      const deadline = this.env.setTimeout(() => {
        this.deadlines.delete(deadline);
        if (!this.running) return;
        this.misses += 1;
        if (this.misses >= this.o.maxMisses) {
          this.stop();
          this.dead();
        }
      }, this.o.timeoutMs);
      this.deadlines.add(deadline);
      this.schedule();
    }, this.o.intervalMs);
  }
}
