//! Everything the client writes, except `mark` echoes and the heartbeat
//! ping (the room does not count those), goes out through here, one token
//! of the bucket per frame and one of the byte bucket per byte, in this order:
//!
//!  1. `get_state` (once, right after a fresh welcome);
//!  2. durable sends (publish/set, oldest first) and ephemeral ones (this
//!     tab's presence, signals: latest wins per key) take turns while both
//!     wait, so neither starves the other;
//!  3. an ephemeral frame with no durable send waiting leaves a reserve of
//!     tokens (a fifth of the burst) untouched, so a publish made during a
//!     cursor storm goes out at once.

import { TokenBucket, type Pace, type RateOptions } from "./bucket.js";
import type { Env, TimerHandle } from "./env.js";
import { byteLength } from "./json.js";
import { Latest } from "./latest.js";
import { Outbox } from "./outbox.js";

/** The latest-wins key of this tab's presence (topics never start with `$`). */
export const PRESENCE_KEY = "$presence";

const GET_STATE = '{"type":"get_state"}';

/** An ephemeral frame at most this long (bytes) may pass a durable one waiting for bytes. */
const SMALL_EPHEMERAL = 1024;

export class Sender {
  readonly outbox = new Outbox();
  readonly bucket: TokenBucket;
  /** This tab's share of the user's byte budget: one token a byte of what it writes. */
  readonly bytes: TokenBucket;
  private readonly latest: Latest;
  private online = false;
  private wantState = false;
  /** A `get_state` went on this connection and its `state` has not come yet. */
  stateAsked = false;
  /** Which kind went last when both waited: they alternate. */
  private lastWasDurable = false;
  private timer: TimerHandle | null = null;
  private timerAt = Infinity;
  /** Re-entrancy guard: a write can make the socket call back synchronously. */
  private pumping = false;
  private again = false;

  constructor(
    private readonly env: Env,
    rate: RateOptions,
    pace: Pace,
    bytePace: Pace,
    /** Writes to the current socket. */
    private readonly write: (text: string) => void,
  ) {
    this.bucket = new TokenBucket(env, pace);
    this.bytes = new TokenBucket(env, bytePace);
    this.latest = new Latest((key) => (key === PRESENCE_KEY ? rate.presenceIntervalMs : rate.signalIntervalMs));
  }

  get isOnline(): boolean {
    return this.online;
  }

  /** The room announced its limits (or this user's share of them changed). */
  setPace(pace: Pace, bytePace: Pace): void {
    this.bucket.setPace(pace);
    this.bytes.setPace(bytePace);
    this.pump();
  }

  /**
   * A connection got its welcome: resend every unacked durable send, after
   * a `get_state` when `askState` (a fresh start, not a resume).
   */
  resume(askState = false): void {
    this.online = true;
    this.wantState = askState;
    this.stateAsked = false;
    this.outbox.resume();
    this.pump();
  }

  /** Asks for the state again (the room refused the last ask for its reply budget). */
  askState(): void {
    if (!this.online) return;
    this.wantState = true;
    this.pump();
  }

  /** The connection is gone: durable sends wait; ephemeral ones are dropped. */
  pause(): void {
    this.online = false;
    this.wantState = false;
    this.stateAsked = false;
    this.outbox.pause();
    this.latest.clear();
    this.cancelTimer();
  }

  /** A durable send, kept until acked. */
  durable(id: string, text: string): Promise<number> {
    const p = this.outbox.add(id, text);
    this.pump();
    return p;
  }

  /** Writes the unacked durable sends again (after `rate_limited`). */
  rewrite(): void {
    this.outbox.rewrite();
    this.pump();
  }

  /** This tab's presence frame: latest wins. Dropped unless connected. */
  presence(text: string): void {
    this.ephemeral(PRESENCE_KEY, text);
  }

  /** A signal frame: latest wins per topic. Dropped unless connected. */
  signal(topic: string, text: string): boolean {
    return this.ephemeral(topic, text);
  }

  /** Whether a frame for this latest-wins key is still waiting. */
  waiting(key: string): boolean {
    return this.latest.has(key);
  }

  private ephemeral(key: string, text: string): boolean {
    if (!this.online) return false;
    this.latest.put(key, text);
    this.pump();
    return true;
  }

  /** Writes whatever may go now; sets a timer for what has to wait. */
  private pump(): void {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        while (this.online && this.step());
      } while (this.again);
    } finally {
      this.pumping = false;
    }
  }

  /** Writes one frame if one may go now; false when nothing can. */
  private step(): boolean {
    const now = this.env.now();
    const durable = this.outbox.waiting;
    const eph = this.latest.next(now);
    const ephDue = eph !== null && "key" in eph;
    let kind: "state" | "durable" | "ephemeral";
    let need = 1;
    if (this.wantState) kind = "state";
    else if (durable && ephDue) kind = this.lastWasDurable ? "ephemeral" : "durable";
    else if (durable) kind = "durable";
    else if (ephDue) {
      kind = "ephemeral";
      need = 1 + this.bucket.current.reserve;
    } else {
      if (eph !== null && "at" in eph) this.schedule(eph.at - now);
      return false;
    }
    let text = kind === "state" ? GET_STATE : kind === "durable" ? this.outbox.peek()! : (eph as { text: string }).text;
    let size = byteLength(text);
    let wait = Math.max(this.bucket.wait(need), this.bytes.wait(size));
    if (wait > 0 && kind === "durable" && ephDue) {
      // A big write waiting for its bytes holds back no cursor: a small ephemeral frame (a
      // cursor, a presence state) that fits now goes first. Only small ones, so that a stream
      // of big signals cannot keep the write waiting.
      const small = (eph as { text: string }).text;
      const smallSize = byteLength(small);
      if (smallSize <= SMALL_EPHEMERAL && this.bucket.wait(1) === 0 && this.bytes.wait(smallSize) === 0) {
        [kind, text, size, wait] = ["ephemeral", small, smallSize, 0];
      }
    }
    if (wait > 0) {
      // Also wake for a slot whose interval ends sooner: it may change the choice.
      this.schedule(eph !== null && "at" in eph ? Math.min(wait, eph.at - now) : wait);
      return false;
    }
    this.bucket.take();
    this.bytes.take(size);
    if (kind === "state") {
      this.wantState = false;
      this.stateAsked = true;
      this.write(GET_STATE);
    } else if (kind === "durable") {
      this.lastWasDurable = true;
      this.write(this.outbox.shift()!);
    } else {
      const { key, text } = eph as { key: string; text: string };
      this.lastWasDurable = false;
      this.latest.sent(key, now);
      this.write(text);
    }
    return true;
  }

  private schedule(ms: number): void {
    const at = this.env.now() + Math.max(0, ms);
    if (this.timer !== null && this.timerAt <= at) return;
    this.cancelTimer();
    this.timerAt = at;
    this.timer = this.env.setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.pump();
    }, Math.max(0, ms));
  }

  private cancelTimer(): void {
    if (this.timer !== null) this.env.clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
  }
}
