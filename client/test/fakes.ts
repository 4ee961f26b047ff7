//! Test doubles: a fake clock (virtual time, ordered timers), fake sockets
//! with a scriptable server side, in-memory storage and a seeded random.

import type { Env, SocketLike, StorageLike, WakeWhy } from "../src/env.js";

/** Deterministic uniform [0,1) generator (mulberry32). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Timer {
  id: number;
  at: number;
  order: number;
  fn: () => void;
}

/** Lets pending promise callbacks run (getToken, endpoint choice). */
export const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Virtual time: timers run only inside `advance`, in (time, creation) order. */
export class FakeClock {
  t = 1_760_000_000_000;
  private heap: Timer[] = [];
  private live = new Set<number>();
  private nextId = 1;
  private order = 0;

  now = (): number => this.t;

  setTimeout = (fn: () => void, ms: number): number => {
    const id = this.nextId++;
    this.push({ id, at: this.t + Math.max(0, ms || 0), order: this.order++, fn });
    this.live.add(id);
    return id;
  };

  clearTimeout = (id: unknown): void => {
    this.live.delete(id as number);
  };

  /** Timers still due to run. */
  get pending(): number {
    return this.live.size;
  }

  /** Runs every timer due within `ms`, letting promises settle between them. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (;;) {
      const top = this.heap[0];
      if (!top || top.at > end) break;
      this.pop();
      if (!this.live.delete(top.id)) continue;
      this.t = top.at;
      top.fn();
      await settle();
    }
    this.t = end;
    await settle();
  }

  /** Synchronous variant for big simulations (no promise settling between timers). */
  runUntil(end: number): void {
    for (;;) {
      const top = this.heap[0];
      if (!top || top.at > end) break;
      this.pop();
      if (!this.live.delete(top.id)) continue;
      this.t = top.at;
      top.fn();
    }
    this.t = end;
  }

  private less(a: Timer, b: Timer): boolean {
    return a.at < b.at || (a.at === b.at && a.order < b.order);
  }

  private push(t: Timer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
      if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}

export class MemoryStorage implements StorageLike {
  map = new Map<string, string>();
  getItem(k: string): string | null {
    return this.map.get(k) ?? null;
  }
  setItem(k: string, v: string): void {
    this.map.set(k, v);
  }
  removeItem(k: string): void {
    this.map.delete(k);
  }
}

/** A socket whose server side the test drives. `close()` does not fire onclose: like a lingering TCP. */
export class FakeSocket implements SocketLike {
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string; wasClean?: boolean }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  sent: string[] = [];
  closedByClient: { code: number | undefined; reason: string | undefined } | null = null;

  constructor(
    readonly url: string,
    readonly createdAt: number,
  ) {}

  get params(): URLSearchParams {
    return new URL(this.url).searchParams;
  }

  get path(): string {
    return new URL(this.url).pathname;
  }

  send(data: string): void {
    if (this.readyState !== 1) throw new Error("InvalidStateError: not open");
    this.sent.push(data);
  }

  close(code?: number, reason?: string): void {
    this.closedByClient = { code, reason };
    const connecting = this.readyState === 0;
    if (this.readyState < 2) this.readyState = 2;
    // As Node's `ws` does: closing a socket that is still connecting emits
    // `error` on the next tick, and an `error` nobody listens to then throws
    // out of the event loop (a try around close() does not catch it).
    if (connecting) {
      queueMicrotask(() => {
        const e = new Error("WebSocket was closed before the connection was established");
        if (this.onerror === null) throw e;
        this.onerror(e);
      });
    }
  }

  /** Frames the client sent, parsed (pings included). */
  frames(): Array<Record<string, unknown>> {
    return this.sent.map((s) => JSON.parse(s) as Record<string, unknown>);
  }

  /** Sent frames of one type. */
  ofType(type: string): Array<Record<string, unknown>> {
    return this.frames().filter((f) => f.type === type);
  }

  // --- the server side ---
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  receive(frame: unknown): void {
    this.onmessage?.({ data: typeof frame === "string" ? frame : JSON.stringify(frame) });
  }

  serverClose(code: number, reason = ""): void {
    this.readyState = 3;
    this.onclose?.({ code, reason, wasClean: code !== 1006 });
  }

  /** The connection failed before opening (refused, DNS, TLS): error then 1006. */
  refuse(): void {
    this.readyState = 3;
    this.onerror?.({});
    this.onclose?.({ code: 1006, reason: "", wasClean: false });
  }
}

/** The page's `online` / `visibilitychange` events, fired by the test. */
export class FakePage {
  private listeners = new Set<(why: WakeWhy) => void>();

  /** What `env.onWake` is. */
  source = (fn: (why: WakeWhy) => void): (() => void) => {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  };

  /** Listeners installed now. */
  get listening(): number {
    return this.listeners.size;
  }

  fire(why: WakeWhy): void {
    for (const fn of [...this.listeners]) fn(why);
  }
}

export interface World {
  clock: FakeClock;
  page: FakePage;
  env: Env;
  sockets: FakeSocket[];
  session: MemoryStorage;
  local: MemoryStorage;
  /** The newest socket. */
  last(): FakeSocket;
}

/** One client's surroundings. `onSocket` sees every socket as it is created. */
export function world(opts: { seed?: number; clock?: FakeClock; onSocket?: (s: FakeSocket) => void } = {}): World {
  const clock = opts.clock ?? new FakeClock();
  const sockets: FakeSocket[] = [];
  const session = new MemoryStorage();
  const local = new MemoryStorage();
  const random = seeded(opts.seed ?? 1);
  const page = new FakePage();
  const onSocket = opts.onSocket;
  class Socket extends FakeSocket {
    constructor(url: string) {
      super(url, clock.now());
      sockets.push(this);
      onSocket?.(this);
    }
  }
  const env: Env = {
    now: clock.now,
    setTimeout: clock.setTimeout,
    clearTimeout: clock.clearTimeout,
    random,
    randomBytes: (b) => {
      for (let i = 0; i < b.length; i++) b[i] = Math.floor(random() * 256);
      return b;
    },
    WebSocket: Socket,
    sessionStorage: session,
    localStorage: local,
    onWake: page.source,
  };
  return {
    clock,
    page,
    env,
    sockets,
    session,
    local,
    last: () => {
      const s = sockets[sockets.length - 1];
      if (!s) throw new Error("no socket yet");
      return s;
    },
  };
}

export interface WelcomeOpts {
  seq?: number;
  epoch?: string;
  resumed?: boolean;
  missed?: number;
  region?: string;
  home?: string;
  members?: Record<string, unknown>;
  large?: boolean;
  /** The welcome's `limits` (absent: none, as from an older server). */
  limits?: Record<string, number>;
  /** The user the room says this session is (default: the session). */
  user?: string;
  /** The room's member count in the welcome's summary (default 1). */
  roomMembers?: number;
}

/** Opens `s` and sends it a welcome for the session in its URL. */
export function welcome(s: FakeSocket, o: WelcomeOpts = {}): void {
  const session = s.params.get("session")!;
  s.open();
  s.receive({
    type: "welcome",
    room: decodeURIComponent(s.path.split("/")[2] ?? ""),
    session,
    user: o.user ?? session,
    conn: "c-" + s.createdAt,
    region: o.region ?? "OC",
    ...(o.home ? { home: o.home } : {}),
    epoch: o.epoch ?? "e1",
    seq: o.seq ?? 0,
    resumed: o.resumed ?? false,
    missed: o.missed ?? 0,
    presence: {
      members: o.members ?? { [session]: { user: o.user ?? session, region: o.region ?? "OC", state: {}, since: 1 } },
      summary: ((n) => ({ members: n, users: n, connections: n, regions: { OC: { members: n, users: n } } }))(
        o.roomMembers ?? 1,
      ),
      ...(o.large ? { large: true } : {}),
    },
    ...(o.limits ? { limits: o.limits } : {}),
  });
}

export function message(seq: number, topic = "chat", data: unknown = { n: seq }, extra: Record<string, unknown> = {}) {
  return { type: "message", seq, id: `m${seq}`, session: "s-other-123", user: "u", region: "EU", topic, data, ts: seq, ...extra };
}

export function stateMessage(seq: number, key: string, value: unknown) {
  return message(seq, "$state", { key, value, version: seq });
}
