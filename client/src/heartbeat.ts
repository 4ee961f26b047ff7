//! Liveness of an open socket: an exact `{"type":"ping"}` every 30 s; a ping
//! whose pong has not come within 35 s is a miss; two misses in a row mean
//! the socket is dead even if the browser still calls it open.

import type { Env, TimerHandle } from "./env.js";

export interface HeartbeatOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Misses in a row that declare the socket dead. */
  maxMisses: number;
}

export const DEFAULT_HEARTBEAT: HeartbeatOptions = { intervalMs: 30_000, timeoutMs: 35_000, maxMisses: 2 };

export class Heartbeat {
  private tick: TimerHandle | null = null;
  private deadlines = new Set<TimerHandle>();
  private misses = 0;
  private running = false;

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
    if (this.tick !== null) this.env.clearTimeout(this.tick);
    this.tick = null;
    for (const d of this.deadlines) this.env.clearTimeout(d);
    this.deadlines.clear();
  }

  /** A pong arrived: the socket is alive, every outstanding ping is answered. */
  pong(): void {
    this.misses = 0;
    for (const d of this.deadlines) this.env.clearTimeout(d);
    this.deadlines.clear();
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
