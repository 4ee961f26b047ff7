//! Durable sends (publish/set): kept, in order, until acked, and queued to
//! be written again on every new connection (the room deduplicates by
//! (session, id), so a resend whose first copy was stored is answered with
//! the original ack). Holds no timers: the sender (sender.ts) decides when
//! the head of the queue goes out.

import { HomeroomError } from "./errors.js";

interface Pending {
  text: string;
  resolve(seq: number): void;
  reject(err: HomeroomError): void;
}

export class Outbox {
  private pending = new Map<string, Pending>();
  /** Ids to write on this connection, oldest first. */
  private queue: string[] = [];
  private online = false;

  /** Unacked durable sends. */
  get size(): number {
    return this.pending.size;
  }

  /** Keeps a durable send until its ack; queues it if connected. */
  add(id: string, text: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { text, resolve, reject });
      if (this.online) this.queue.push(id);
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

  /** A connection is ready: every unacked send is queued again, oldest first. */
  resume(): void {
    this.online = true;
    this.queue = [...this.pending.keys()];
  }

  /**
   * Queues every unacked send again on the same connection (after a
   * `rate_limited` error, whose frame the room did not identify).
   */
  rewrite(): void {
    if (!this.online) return;
    const queued = new Set(this.queue);
    for (const id of this.pending.keys()) if (!queued.has(id)) this.queue.push(id);
  }

  /** The connection is gone: hold everything until `resume`. */
  pause(): void {
    this.online = false;
    this.queue = [];
  }

  rejectAll(err: HomeroomError): void {
    this.pause();
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(err);
  }

  /** Whether a send waits to be written. */
  get waiting(): boolean {
    this.skipAcked();
    return this.queue.length > 0;
  }

  /** The next send to write, left in place, or null. */
  peek(): string | null {
    this.skipAcked();
    const id = this.queue[0];
    return id === undefined ? null : this.pending.get(id)!.text;
  }

  /** Takes the next send to write, or null. */
  shift(): string | null {
    this.skipAcked();
    const id = this.queue.shift();
    return id === undefined ? null : this.pending.get(id)!.text;
  }

  /** Acked (or failed) ids still in the queue are skipped, not written. */
  private skipAcked(): void {
    while (this.queue.length > 0 && !this.pending.has(this.queue[0]!)) this.queue.shift();
  }
}
