//! A fake room server on the fake clock that enforces the room's real
//! limits (the client's DEFAULT_LIMITS, which tests/settings.rs holds to the
//! server's one declaration) the way src/room/rate.rs does: a token bucket
//! per connection (rate/burst) and one per user over all their connections
//! (user_rate/user_burst), and one of bytes per user (user_bytes_per_sec/user_bytes_burst,
//! a frame's UTF-8 length), all in integer milli-units refilled continuously; a refused
//! frame is a `rate_limited` error and counts toward abuse (100 refusals,
//! draining 10/s, close 4029). Mark echoes and the exact ping are free, as
//! on the server. Frames reach it after a jittered delay that keeps their
//! order, so frames sent apart can arrive bunched, as on a real network.

import { DEFAULT_LIMITS, PING, type Limits } from "../src/protocol.js";
import type { FakeClock, FakeSocket } from "./fakes.js";

export type RoomLimits = Limits;

export const SERVER_LIMITS: RoomLimits = DEFAULT_LIMITS;
/** src/room/config.rs `abuse_limit` and `abuse_drain_per_sec` (not announced; tests/settings.rs checks them). */
export const ABUSE_LIMIT = 100;
export const ABUSE_DRAIN_PER_SEC = 10;

/** src/room/rate.rs `Bucket`: milli-units, refilled by elapsed ms × per-second rate. */
class Bucket {
  private milli: number;
  private last: number;

  constructor(
    private readonly perSec: number,
    private readonly burst: number,
    now: number,
  ) {
    this.milli = burst * 1000;
    this.last = now;
  }

  take(now: number, n = 1): boolean {
    const elapsed = Math.max(0, now - this.last);
    this.last = Math.max(this.last, now);
    this.milli = Math.min(this.burst * 1000, this.milli + elapsed * this.perSec);
    if (this.milli >= n * 1000) {
      this.milli -= n * 1000;
      return true;
    }
    return false;
  }
}

interface Conn {
  socket: FakeSocket;
  session: string;
  user: string;
  bucket: Bucket;
  abuse: number;
  abuseAt: number;
  /** When the last frame from this client arrives (arrivals keep send order). */
  arrival: number;
  open: boolean;
}

export interface Counters {
  /** Frames the server admitted, per connection session. */
  admitted: number;
  /** Frames refused for the rate (each one a `rate_limited` error). */
  refused: number;
  /** 4029 closes. */
  abuseCloses: number;
  /** Frames over max_frame (close 1009) or presence over presence_max. */
  tooLarge: number;
}

export class FakeRoom {
  readonly counters: Counters = { admitted: 0, refused: 0, abuseCloses: 0, tooLarge: 0 };
  /** Presence state per session, as the room holds it. */
  readonly presence = new Map<string, unknown>();
  /** The last signal the room relayed, per sender session and topic. */
  readonly signals = new Map<string, unknown>();
  private conns: Conn[] = [];
  private users = new Map<string, Bucket>();
  private userBytes = new Map<string, Bucket>();
  private seq = 0;
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly clock: FakeClock,
    private readonly random: () => number,
    private readonly limits: RoomLimits = SERVER_LIMITS,
    /** One-way latency, ms: `base` plus up to `jitter`. */
    private readonly latency = { base: 20, jitter: 40 },
  ) {}

  /** Serves `socket` (pass as a world's `onSocket`); `user` names its user. */
  attach(socket: FakeSocket, user: (session: string) => string = (s) => s): void {
    const session = socket.params.get("session")!;
    const conn: Conn = {
      socket,
      session,
      user: user(session),
      bucket: new Bucket(this.limits.rate, this.limits.burst, this.clock.now()),
      abuse: 0,
      abuseAt: this.clock.now(),
      arrival: 0,
      open: true,
    };
    // The socket's send() is the client's; the server sees each frame later.
    const send = socket.send.bind(socket);
    socket.send = (text: string) => {
      send(text);
      const at = Math.max(conn.arrival, this.clock.now() + this.latency.base + this.random() * this.latency.jitter);
      conn.arrival = at;
      this.clock.setTimeout(() => this.frame(conn, text), at - this.clock.now());
    };
    this.clock.setTimeout(() => this.welcome(conn), this.latency.base);
  }

  private welcome(conn: Conn): void {
    this.conns = this.conns.filter((c) => c.session !== conn.session || !c.open);
    this.conns.push(conn);
    if (!this.presence.has(conn.session)) this.presence.set(conn.session, {});
    const members = Object.fromEntries(
      this.conns.filter((c) => c.open).map((c) => [c.session, { user: c.user, region: "OC", state: this.presence.get(c.session), since: 1 }]),
    );
    conn.socket.open();
    this.deliver(conn, {
      type: "welcome",
      room: "r1",
      session: conn.session,
      user: conn.user,
      conn: "c-" + conn.session,
      region: "OC",
      epoch: "e1",
      seq: this.seq,
      resumed: false,
      missed: 0,
      presence: { members },
      limits: { ...this.limits },
    });
    const join = { [conn.session]: members[conn.session] };
    for (const c of this.others(conn)) this.deliver(c, { type: "presence", joins: join, leaves: [] });
  }

  private others(conn: Conn): Conn[] {
    return this.conns.filter((c) => c !== conn && c.open);
  }

  /** Server → client, after the latency (sync on the clock's timers). */
  private deliver(conn: Conn, frame: unknown): void {
    this.clock.setTimeout(() => {
      if (conn.open && conn.socket.readyState === 1) conn.socket.receive(frame);
    }, this.latency.base);
  }

  private frame(conn: Conn, text: string): void {
    if (!conn.open) return;
    const now = this.clock.now();
    if (text === PING) return this.deliver(conn, { type: "pong" });
    const f = JSON.parse(text) as Record<string, unknown>;
    if (f.type === "mark") return; // a confirming echo costs nothing
    if (text.length > this.limits.max_frame) {
      this.counters.tooLarge += 1;
      return this.close(conn, 1009, "");
    }
    const user = this.users.get(conn.user) ?? new Bucket(this.limits.user_rate, this.limits.user_burst, now);
    this.users.set(conn.user, user);
    const { user_bytes_per_sec: perSec, user_bytes_burst: burst } = this.limits;
    const bytes = this.userBytes.get(conn.user) ?? new Bucket(perSec, burst, now);
    this.userBytes.set(conn.user, bytes);
    const size = Buffer.byteLength(text);
    if (!conn.bucket.take(now) || !user.take(now) || !bytes.take(now, size)) {
      this.counters.refused += 1;
      conn.abuse = Math.max(0, conn.abuse - (now - conn.abuseAt) * ABUSE_DRAIN_PER_SEC);
      conn.abuseAt = now;
      conn.abuse += 1000;
      if (conn.abuse >= ABUSE_LIMIT * 1000) {
        this.counters.abuseCloses += 1;
        return this.close(conn, 4029, "");
      }
      return this.deliver(conn, { type: "error", code: "rate_limited", message: "slow down" });
    }
    this.counters.admitted += 1;
    switch (f.type) {
      case "publish":
      case "set": {
        const id = f.id as string;
        const key = `${conn.session}\0${id}`;
        const dup = this.seen.get(key);
        if (dup !== undefined) return this.deliver(conn, { type: "ack", id, seq: dup });
        this.seq += 1;
        this.seen.set(key, this.seq);
        this.deliver(conn, { type: "ack", id, seq: this.seq });
        const data = f.type === "set" ? { key: f.key, value: f.value, version: this.seq } : f.data;
        const topic = f.type === "set" ? "$state" : f.topic;
        const msg = { type: "message", seq: this.seq, id, session: conn.session, user: conn.user, region: "OC", topic, data, ts: now };
        for (const c of this.conns) if (c.open) this.deliver(c, msg);
        return;
      }
      case "presence": {
        if (JSON.stringify(f.state).length > this.limits.presence_max) {
          this.counters.tooLarge += 1;
          return this.deliver(conn, { type: "error", code: "too_large", message: "presence" });
        }
        this.presence.set(conn.session, f.state);
        const member = { user: conn.user, region: "OC", state: f.state, since: 1 };
        for (const c of this.others(conn)) this.deliver(c, { type: "presence", joins: { [conn.session]: member }, leaves: [] });
        return;
      }
      case "signal":
        this.signals.set(`${conn.session}\0${f.topic as string}`, f.data);
        for (const c of this.others(conn)) this.deliver(c, { type: "signal", session: conn.session, topic: f.topic, data: f.data });
        return;
      case "get_state":
        return this.deliver(conn, { type: "state", seq: this.seq, state: {} });
      default:
        return this.deliver(conn, { type: "error", code: "bad_frame", message: "unknown type" });
    }
  }

  private close(conn: Conn, code: number, reason: string): void {
    conn.open = false;
    this.clock.setTimeout(() => conn.socket.serverClose(code, reason), this.latency.base);
  }
}
