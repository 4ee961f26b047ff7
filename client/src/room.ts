//! The room handle: one logical connection to a room that survives socket
//! drops. Owns the connect/reconnect cycle, resume (since/epoch, replay,
//! resync, gap detection), the room state and presence views, and the
//! mapping of acks and errors to the promises of durable sends.

import { DEFAULT_BACKOFF, plan, type BackoffOptions, type Cause, type StopWhy } from "./backoff.js";
import { Emitter } from "./emitter.js";
import { OPEN, resolveEnv, type Env, type SocketLike, type TimerHandle } from "./env.js";
import { HomeroomError } from "./errors.js";
import { DEFAULT_HEARTBEAT, Heartbeat, type HeartbeatOptions } from "./heartbeat.js";
import { DEFAULT_RATE, Outbox, type RateOptions } from "./outbox.js";
import { PresenceStore, type Presence } from "./presence.js";
import {
  CLOSE,
  markEcho,
  MAX_FRAME_BYTES,
  PING,
  STATE_TOPIC,
  type Json,
  type MessageFrame,
  type ServerFrame,
  type SignalFrame,
  type StateEntry,
  type Summary,
  type WelcomeFrame,
} from "./protocol.js";
import { DEFAULT_REGIONS, EndpointChooser, wsBase, type ChoiceWhy, type RegionOptions } from "./regions.js";
import { freshSession, IdMaker, tabSession } from "./session.js";

export interface ConnectOptions {
  /** The room name: 1-64 chars of A-Z a-z 0-9 . _ : - */
  room: string;
  /**
   * The kind of room: the path segment the deployment serves it at
   * (`/{kind}/{room}/ws`), each kind with its own rules. Default `rooms`.
   */
  kind?: string;
  /** The deployment's base URL (http(s) or ws(s)); default: the page's origin. */
  url?: string;
  /** Several endpoints of the deployment: probed, the fastest kept for a day. */
  regions?: readonly string[];
  /**
   * This tab's session; default: kept in sessionStorage. Replaced by a fresh
   * random one if the room says it belongs to another user (4409).
   */
  session?: string;
  /** A room token (PROTOCOL.md "Auth"). */
  token?: string;
  /**
   * Called for a token before the first connect, after a 1008 or 4401 close
   * and when the token expired. Without it, a 4401 (token refused) stops the
   * client with `why: "auth"`.
   */
  getToken?: () => string | Promise<string>;
  /**
   * Token refusals (4401 closes) in a row, with no welcome in between, after
   * which the client stops for good with `why: "auth"`. Default 3.
   */
  maxAuthRefusals?: number;
  /** This session's presence state, sent on every connect. */
  presence?: Record<string, Json>;
  /** Replace parts of the environment (tests: fake clock, sockets, storage). */
  env?: Partial<Env>;
  backoff?: Partial<BackoffOptions>;
  heartbeat?: Partial<HeartbeatOptions>;
  probe?: Partial<RegionOptions>;
  rate?: Partial<RateOptions>;
  /** A connect that has no welcome by then is abandoned, ms. Default 10 s. */
  connectTimeoutMs?: number;
}

export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

export interface Status {
  state: ConnectionState;
  /** The endpoint of the current or last connection, and how it was chosen. */
  endpoint: string | null;
  endpointChoice: ChoiceWhy | null;
  /** From the last welcome: where this client connected, and the room's home. */
  region: string | null;
  home: string | null;
  user: string | null;
  conn: string | null;
  /** The highest seq applied, and the epoch of the room's log. */
  seq: number;
  epoch: string | null;
  /** Whether the last connect resumed, and how many messages it replayed. */
  resumed: boolean;
  missed: number;
  /** Failures in a row (reset by a connection that stays up 10 s). */
  attempt: number;
  /** When the next connect is due (epoch ms), while waiting to reconnect. */
  retryAt: number | null;
  /** The last close code and reason the client saw. */
  lastClose: { code: number; reason: string } | null;
  /**
   * Why the connection is down or closed, in a word. Once closed: `closed`,
   * `superseded` (4001), `auth` (4401: no good token), `session_taken`
   * (4409 again and again), or a 4403 reason (`kicked`, `blocked`, ...).
   */
  why: string | null;
  /** The session this client connects with (changes after a 4409). */
  session: string;
  /** Unacknowledged publishes and sets. */
  pending: number;
}

export interface MessageEvent extends MessageFrame {
  /** Delivered by a resume's replay rather than live. */
  replayed: boolean;
}

export interface StateEvent {
  key: string;
  value: Json;
  version: number;
  message: MessageFrame;
}

export interface PresenceEvent {
  /** Sessions that joined or changed their state / region. */
  joins: string[];
  leaves: string[];
  /** The whole member list was replaced (welcome, reset). */
  reset: boolean;
  presence: Presence;
}

export interface ResyncEvent {
  /** `epoch` / `gap` from the server, or `initial` for the first state load. */
  reason: string;
  seq: number;
}

export interface RoomEvents {
  message: MessageEvent;
  state: StateEvent;
  signal: SignalFrame;
  presence: PresenceEvent;
  summary: Summary;
  status: Status;
  resync: ResyncEvent;
  error: HomeroomError;
}

const ROOM_RE = /^[A-Za-z0-9._:-]{1,64}$/;
const KIND_RE = /^[A-Za-z0-9_-]{1,32}$/;
const TOPIC_MAX = 64;

/** Client-initiated close codes (browsers allow 1000 and 3000-4999). */
const CLIENT_CLOSE = { GAP: 4000, HEARTBEAT: 4002, TIMEOUT: 4003 } as const;

export class Room {
  readonly room: string;
  /** The kind of room (its path segment). */
  readonly kind: string;

  private readonly env: Env;
  private readonly events = new Emitter<RoomEvents>();
  private readonly chooser: EndpointChooser;
  private readonly ids: IdMaker;
  private readonly outbox: Outbox;
  private readonly heartbeat: Heartbeat;
  private readonly backoffOpts: BackoffOptions;
  private readonly connectTimeoutMs: number;
  private readonly presenceStore = new PresenceStore();
  private readonly stateMap = new Map<string, StateEntry>();

  private socket: SocketLike | null = null;
  /** Bumped for every connect attempt; callbacks of older attempts are ignored. */
  private generation = 0;
  private welcomed = false;
  private everOpen = false;
  private closedForGood = false;
  private retryTimer: TimerHandle | null = null;
  private connectTimer: TimerHandle | null = null;
  private rewriteTimer: TimerHandle | null = null;
  private attempt = 0;
  private welcomedAt: number | null = null;
  /** 4401 and 4409 closes since the last welcome. */
  private authRefusals = 0;
  private sessionTaken = 0;

  private sessionId: string;
  /** The session came from sessionStorage (a fresh one replaces it there). */
  private readonly sessionStored: boolean;

  private token: string | undefined;
  private readonly getToken: (() => string | Promise<string>) | undefined;
  private needToken: boolean;

  // Resume cursor: valid once a state snapshot (state/resync) was applied.
  private seqApplied = 0;
  private epoch: string | null = null;
  private baseline = false;
  private replayUntil = 0;
  private myPresence: Record<string, Json> | null;

  private info: Omit<Status, "state" | "seq" | "epoch" | "attempt" | "pending" | "endpoint" | "endpointChoice" | "session"> = {
    region: null,
    home: null,
    user: null,
    conn: null,
    resumed: false,
    missed: 0,
    retryAt: null,
    lastClose: null,
    why: null,
  };

  constructor(opts: ConnectOptions) {
    if (!ROOM_RE.test(opts.room) || opts.room === "." || opts.room === "..") {
      throw new TypeError("homeroom: room must be 1-64 chars of A-Z a-z 0-9 . _ : -");
    }
    this.room = opts.room;
    const kind = opts.kind ?? "rooms";
    if (!KIND_RE.test(kind)) throw new TypeError("homeroom: kind must be 1-32 chars of A-Z a-z 0-9 _ -");
    this.kind = kind;
    this.env = resolveEnv(opts.env);
    this.sessionId = tabSession(this.env, opts.session);
    this.sessionStored = opts.session === undefined;
    this.ids = new IdMaker(this.env);
    this.backoffOpts = { ...DEFAULT_BACKOFF, ...opts.backoff };
    if (opts.maxAuthRefusals !== undefined) {
      if (!Number.isInteger(opts.maxAuthRefusals) || opts.maxAuthRefusals < 1) {
        throw new TypeError("homeroom: maxAuthRefusals must be a positive integer");
      }
      this.backoffOpts.maxAuthRefusals = opts.maxAuthRefusals;
    }
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.token = opts.token;
    this.getToken = opts.getToken;
    this.needToken = this.token === undefined && this.getToken !== undefined;
    this.myPresence = opts.presence ?? null;

    const endpoints = opts.regions?.length ? [...opts.regions] : [opts.url ?? pageOrigin()];
    endpoints.forEach(wsBase); // throws early on a bad URL
    this.chooser = new EndpointChooser(this.env, endpoints, { ...DEFAULT_REGIONS, ...opts.probe });
    this.outbox = new Outbox(this.env, { ...DEFAULT_RATE, ...opts.rate }, (text) => this.write(text));
    this.heartbeat = new Heartbeat(
      this.env,
      { ...DEFAULT_HEARTBEAT, ...opts.heartbeat },
      () => this.write(PING),
      () => this.fail({ kind: "heartbeat" }, CLIENT_CLOSE.HEARTBEAT),
    );
  }

  // ---- public API -------------------------------------------------------

  on<K extends keyof RoomEvents>(event: K, fn: (payload: RoomEvents[K]) => void): () => void {
    return this.events.on(event, fn);
  }

  off<K extends keyof RoomEvents>(event: K, fn: (payload: RoomEvents[K]) => void): void {
    this.events.off(event, fn);
  }

  /**
   * This tab's session. Fixed for the handle's life, except after a 4409
   * (the id belongs to another user): then a fresh one.
   */
  get session(): string {
    return this.sessionId;
  }

  /** The room state: key to value and version. */
  get state(): ReadonlyMap<string, StateEntry> {
    return this.stateMap;
  }

  get presence(): Presence {
    return this.presenceStore;
  }

  get status(): Status {
    return {
      ...this.info,
      lastClose: this.info.lastClose && { ...this.info.lastClose },
      state: this.closedForGood
        ? "closed"
        : this.welcomed
          ? "open"
          : this.everOpen
            ? "reconnecting"
            : "connecting",
      endpoint: this.chooser.current,
      endpointChoice: this.chooser.lastWhy,
      seq: this.seqApplied,
      epoch: this.epoch,
      attempt: this.attempt,
      pending: this.outbox.size,
      session: this.sessionId,
    };
  }

  /** The highest seq applied. */
  get seq(): number {
    return this.seqApplied;
  }

  /**
   * A durable message: resolves with its seq once the room stored it. Kept
   * and resent across reconnects until then.
   */
  publish(topic: string, data: Json): Promise<number> {
    if (typeof topic !== "string" || topic.length < 1 || topic.length > TOPIC_MAX || topic.startsWith("$")) {
      return Promise.reject(new HomeroomError("invalid", "topic must be 1-64 chars, not starting with $"));
    }
    const id = this.ids.next();
    return this.durable(id, JSON.stringify({ type: "publish", id, topic, data }));
  }

  /**
   * A room state write. With `ifVersion` it is a compare-and-set (0: the key
   * must not exist); a stale one rejects with code `conflict` and the
   * current `version`. Resolves with the new version.
   */
  set(key: string, value: Json, opts: { ifVersion?: number } = {}): Promise<number> {
    if (typeof key !== "string" || key.length < 1 || key.length > 64) {
      return Promise.reject(new HomeroomError("invalid", "key must be 1-64 chars"));
    }
    const id = this.ids.next();
    const frame: Record<string, Json> = { type: "set", id, key, value };
    if (opts.ifVersion !== undefined) frame.if_version = opts.ifVersion;
    return this.durable(id, JSON.stringify(frame));
  }

  /**
   * An ephemeral message to the other connections. Sent only while connected
   * and under the rate limit, never queued: returns whether it went out.
   */
  signal(topic: string, data: Json): boolean {
    if (!this.welcomed || typeof topic !== "string" || topic.length < 1 || topic.length > TOPIC_MAX) return false;
    if (topic.startsWith("$")) return false;
    const text = JSON.stringify({ type: "signal", topic, data });
    if (byteLength(text) > MAX_FRAME_BYTES) return false;
    return this.outbox.ephemeral(text);
  }

  /** Replaces this session's presence state (kept and sent again on every connect). */
  setPresence(state: Record<string, Json>): void {
    this.myPresence = state;
    if (!this.welcomed) return;
    this.outbox.control(JSON.stringify({ type: "presence", state }));
    if (this.presenceStore.updateSelf(this.sessionId, state)) {
      this.events.emit("presence", { joins: [this.sessionId], leaves: [], reset: false, presence: this.presenceStore });
    }
  }

  /** Resolves at the next welcome (at once if connected); rejects once the handle is closed for good. */
  whenOpen(): Promise<Status> {
    if (this.welcomed) return Promise.resolve(this.status);
    if (this.closedForGood) return Promise.reject(new HomeroomError(this.info.why ?? "closed", "the room closed"));
    return new Promise((resolve, reject) => {
      const offStatus = this.on("status", (s) => {
        if (s.state === "open") {
          offStatus();
          resolve(s);
        } else if (s.state === "closed") {
          offStatus();
          reject(new HomeroomError(s.why ?? "closed", "the room closed"));
        }
      });
    });
  }

  /** Closes for good: no reconnect; unacknowledged sends reject with `closed`. */
  close(): void {
    if (this.closedForGood) return;
    const s = this.socket;
    this.detach();
    if (s) safeClose(s, 1000, "client closed");
    this.finish("closed", new HomeroomError("closed", "the room handle was closed"));
  }

  // ---- connect cycle ------------------------------------------------------

  /** Starts the first connect (called by `connect`). */
  start(): void {
    this.open();
  }

  /**
   * One connect attempt: choose the endpoint, get a token if needed, open
   * the socket. Synchronous unless probing or `getToken` has to be awaited.
   */
  private open(): void {
    this.retryTimer = null;
    this.info.retryAt = null;
    const gen = ++this.generation;
    const stale = (): boolean => gen !== this.generation || this.closedForGood;
    const failed = (error: unknown): void => {
      if (!stale()) this.fail({ kind: "error", error });
    };
    this.emitStatus();
    const withToken = (endpoint: string): void => {
      if (stale()) return;
      if (!this.getToken || !(this.needToken || tokenExpired(this.token, this.env.now()))) {
        this.dial(gen, endpoint);
        return;
      }
      let token: string | Promise<string>;
      try {
        token = this.getToken();
      } catch (error) {
        failed(error);
        return;
      }
      void Promise.resolve(token).then((t) => {
        if (stale()) return;
        this.token = t;
        this.needToken = false;
        this.dial(gen, endpoint);
      }, failed);
    };
    let endpoint: string | Promise<string>;
    try {
      endpoint = this.chooser.choose();
    } catch (error) {
      failed(error);
      return;
    }
    if (typeof endpoint === "string") withToken(endpoint);
    else endpoint.then(withToken, failed);
  }

  private dial(gen: number, endpoint: string): void {
    let socket: SocketLike;
    try {
      socket = new this.env.WebSocket(this.roomUrl(endpoint));
    } catch (error) {
      this.fail({ kind: "error", error });
      return;
    }
    this.socket = socket;
    this.connectTimer = this.env.setTimeout(() => {
      if (gen === this.generation) this.fail({ kind: "timeout" }, CLIENT_CLOSE.TIMEOUT);
    }, this.connectTimeoutMs);
    socket.onmessage = (ev) => {
      if (gen !== this.generation) return;
      let frame: ServerFrame;
      try {
        frame = JSON.parse(String(ev.data)) as ServerFrame;
      } catch {
        return; // not JSON: ignore (the protocol only sends JSON objects)
      }
      this.handle(frame);
    };
    socket.onclose = (ev) => {
      if (gen !== this.generation) return;
      this.info.lastClose = { code: ev.code, reason: ev.reason ?? "" };
      this.fail({ kind: "close", code: ev.code, reason: ev.reason, welcomed: this.welcomed });
    };
    socket.onerror = () => {
      // The close event follows with the code; nothing to do here.
    };
  }

  private roomUrl(endpoint: string): string {
    const q = new URLSearchParams({ session: this.sessionId });
    if (this.baseline && this.epoch !== null) {
      q.set("since", String(this.seqApplied));
      q.set("epoch", this.epoch);
    }
    if (this.token !== undefined) q.set("token", this.token);
    return `${wsBase(endpoint)}/${this.kind}/${encodeURIComponent(this.room)}/ws?${q}`;
  }

  /** Drops the current socket's callbacks and timers. */
  private detach(): void {
    this.generation += 1;
    const s = this.socket;
    this.socket = null;
    if (s) s.onopen = s.onmessage = s.onclose = s.onerror = null;
    this.welcomed = false;
    this.heartbeat.stop();
    this.outbox.pause();
    for (const t of [this.connectTimer, this.rewriteTimer, this.retryTimer]) if (t !== null) this.env.clearTimeout(t);
    this.connectTimer = this.rewriteTimer = this.retryTimer = null;
  }

  /**
   * The connection failed or ended. `closeCode` set: the client gives up on
   * a socket that is still open (gap, dead heartbeat, timeout) and closes it.
   */
  private fail(cause: Cause, closeCode?: number): void {
    if (this.closedForGood) return;
    const s = this.socket;
    this.detach();
    if (s && closeCode !== undefined) safeClose(s, closeCode, cause.kind);
    this.chooser.disconnected();
    if (this.welcomedAt !== null && this.env.now() - this.welcomedAt >= this.backoffOpts.stableMs) this.attempt = 0;
    this.welcomedAt = null;
    if (cause.kind === "close" && cause.code === CLOSE.UNAUTHORIZED) this.authRefusals += 1;
    if (cause.kind === "close" && cause.code === CLOSE.SESSION_TAKEN) this.sessionTaken += 1;
    const next = plan(cause, this.attempt, this.env.random, this.backoffOpts, {
      canRefreshToken: this.getToken !== undefined,
      authRefusals: this.authRefusals,
      sessionTaken: this.sessionTaken,
    });
    if (!next.reconnect) {
      this.finish(next.why, new HomeroomError(next.why, stopMessage(next.why, cause)));
      return;
    }
    this.attempt = next.attempt;
    if (next.refreshToken && this.getToken) this.needToken = true;
    if (next.newSession) this.renewSession();
    this.info.why = cause.kind === "close" ? `close ${cause.code}` : cause.kind;
    this.info.retryAt = this.env.now() + next.delay;
    this.retryTimer = this.env.setTimeout(() => this.open(), next.delay);
    this.emitStatus();
  }

  /**
   * The session id belongs to another user (4409): switch to a fresh one.
   * The resume cursor (room-wide), the outbox (its ids are random-prefixed)
   * and this tab's presence state are kept.
   */
  private renewSession(): void {
    const old = this.sessionId;
    this.sessionId = freshSession(this.env, this.sessionStored, old);
  }

  private finish(why: string, err: HomeroomError): void {
    this.detach();
    this.closedForGood = true;
    this.info.why = why;
    this.info.retryAt = null;
    this.outbox.rejectAll(err);
    this.emitStatus();
  }

  private write(text: string): void {
    const s = this.socket;
    if (!s || s.readyState !== OPEN) return; // resent after the next welcome
    try {
      s.send(text);
    } catch {
      // the close event follows
    }
  }

  // ---- frames --------------------------------------------------------------

  private handle(f: ServerFrame): void {
    switch (f.type) {
      case "batch":
        for (const inner of f.frames ?? []) {
          if (!this.socket) return; // an inner frame ended this connection
          this.handle(inner);
        }
        return;
      case "welcome":
        return this.onWelcome(f);
      case "message":
        return this.onMessage(f);
      case "resync":
        this.replaceState(f.state);
        this.seqApplied = f.seq;
        this.baseline = true;
        this.events.emit("resync", { reason: f.reason, seq: f.seq });
        this.emitStatus();
        return;
      case "state":
        // The answer to get_state: exact at f.seq, which (frames being in
        // order) is also the last seq applied.
        this.replaceState(f.state);
        this.seqApplied = Math.max(this.seqApplied, f.seq);
        this.baseline = true;
        this.events.emit("resync", { reason: "initial", seq: f.seq });
        this.emitStatus();
        return;
      case "ack":
        if (this.outbox.ack(f.id, f.seq)) this.emitStatus();
        return;
      case "error":
        return this.onError(f);
      case "signal":
        this.events.emit("signal", f);
        return;
      case "presence": {
        const { joins, leaves } = this.presenceStore.apply(f);
        this.events.emit("presence", { joins, leaves, reset: f.reset === true, presence: this.presenceStore });
        return;
      }
      case "summary":
        this.presenceStore.setSummary(f);
        this.events.emit("summary", this.presenceStore.summary);
        return;
      case "pong":
        this.heartbeat.pong();
        return;
      case "mark":
        // Flow control: echo at once, verbatim, straight to the socket (not
        // paced by the outbox: the room does not count echoes against the
        // rate), welcomed or not. Never an event.
        if (typeof f.mark === "string") this.write(markEcho(f.mark));
        return;
      default:
        return; // unknown frame types are ignored (protocol: additive changes)
    }
  }

  private onWelcome(f: WelcomeFrame): void {
    if (this.connectTimer !== null) this.env.clearTimeout(this.connectTimer);
    this.connectTimer = null;
    const askedResume = this.baseline && this.epoch !== null;
    this.welcomed = true;
    this.everOpen = true;
    this.welcomedAt = this.env.now();
    this.authRefusals = 0;
    this.sessionTaken = 0;
    this.chooser.connected();
    Object.assign(this.info, {
      region: f.region ?? null,
      home: f.home ?? null,
      user: f.user ?? null,
      conn: f.conn ?? null,
      resumed: f.resumed === true,
      missed: f.missed ?? 0,
      retryAt: null,
      why: null,
    });
    this.epoch = f.epoch;
    if (askedResume && f.resumed) {
      // The missed messages follow, before any live frame.
      this.replayUntil = f.seq;
    } else if (askedResume) {
      // A resync follows with the whole state.
      this.replayUntil = 0;
      this.baseline = false;
    } else {
      // A fresh start: live messages continue from f.seq; ask for the state.
      this.replayUntil = 0;
      this.baseline = false;
      this.seqApplied = f.seq;
    }
    this.presenceStore.welcome(f);
    this.heartbeat.start();
    this.outbox.resume();
    if (!askedResume) this.outbox.control('{"type":"get_state"}');
    const mine = f.presence?.members?.[this.sessionId];
    if (this.myPresence && (!mine || JSON.stringify(mine.state) !== JSON.stringify(this.myPresence))) {
      this.outbox.control(JSON.stringify({ type: "presence", state: this.myPresence }));
      this.presenceStore.updateSelf(this.sessionId, this.myPresence);
    }
    this.events.emit("presence", { joins: [...this.presenceStore.members.keys()], leaves: [], reset: true, presence: this.presenceStore });
    this.emitStatus();
  }

  private onMessage(f: MessageFrame): void {
    if (f.seq <= this.seqApplied) return; // already applied
    if (f.seq !== this.seqApplied + 1) {
      // A hole: never apply past it. Reconnect and resume from what we have.
      this.fail({ kind: "gap" }, CLIENT_CLOSE.GAP);
      return;
    }
    this.seqApplied = f.seq;
    if (f.topic === STATE_TOPIC && isStateData(f.data)) {
      const { key, value, version } = f.data;
      const had = this.stateMap.get(key);
      if (!had || had.version < version) this.stateMap.set(key, { value, version });
      this.events.emit("state", { key, value, version, message: f });
    }
    this.events.emit("message", { ...f, replayed: f.seq <= this.replayUntil });
    this.emitStatus();
  }

  private onError(f: { code: string; id?: string; message?: string; version?: number }): void {
    const extra: { id?: string; version?: number } = {};
    if (f.id !== undefined) extra.id = f.id;
    if (f.version !== undefined) extra.version = f.version;
    const err = new HomeroomError(f.code, f.message ?? f.code, extra);
    if (f.id !== undefined && this.outbox.fail(f.id, err)) {
      this.emitStatus();
      return; // the send's promise carries it
    }
    if (f.code === "rate_limited" && this.rewriteTimer === null && this.outbox.size > 0) {
      // The refused frame is not named: write the unacked sends again soon
      // (the room answers the ones it already has with their original ack).
      this.rewriteTimer = this.env.setTimeout(
        () => {
          this.rewriteTimer = null;
          this.outbox.rewrite();
        },
        1000 + this.env.random() * 1000,
      );
    }
    this.events.emit("error", err);
  }

  private durable(id: string, text: string): Promise<number> {
    if (this.closedForGood) return Promise.reject(new HomeroomError("closed", "the room handle is closed"));
    if (byteLength(text) > MAX_FRAME_BYTES) {
      return Promise.reject(new HomeroomError("too_large", `frame over ${MAX_FRAME_BYTES} bytes`, { id }));
    }
    const p = this.outbox.add(id, text);
    this.emitStatus();
    return p;
  }

  private replaceState(state: Record<string, StateEntry> | undefined): void {
    this.stateMap.clear();
    for (const [k, v] of Object.entries(state ?? {})) this.stateMap.set(k, { value: v.value, version: v.version });
  }

  private emitStatus(): void {
    this.events.emit("status", this.status);
  }
}

function isStateData(d: Json): d is { key: string; value: Json; version: number } {
  return typeof d === "object" && d !== null && !Array.isArray(d) && typeof d.key === "string" && typeof d.version === "number";
}

/** The message of the error that pending sends reject with when the client stops. */
function stopMessage(why: StopWhy, cause: Cause): string {
  const reason = cause.kind === "close" && cause.reason ? ` (${cause.reason})` : "";
  switch (why) {
    case "closed":
      return "the server closed the room";
    case "superseded":
      return "this session connected elsewhere (4001)";
    case "auth":
      return `the room refused the token${reason}`;
    case "session_taken":
      return "the room kept refusing this tab's session as another user's (4409)";
    default:
      return `the room refused this user${reason}`;
  }
}

function safeClose(s: SocketLike, code: number, reason: string): void {
  try {
    s.close(code, reason);
  } catch {
    // already closed
  }
}

function byteLength(text: string): number {
  return typeof TextEncoder === "function" ? new TextEncoder().encode(text).length : text.length * 3;
}

function pageOrigin(): string {
  const loc = (globalThis as { location?: { origin?: string } }).location;
  if (loc?.origin && loc.origin !== "null") return loc.origin;
  throw new TypeError("homeroom: pass `url` or `regions` (no page origin here)");
}

/** A homeroom token's `exp` has passed (or is within 30 s). Unknown formats never expire. */
export function tokenExpired(token: string | undefined, now: number): boolean {
  if (token === undefined) return false;
  try {
    const b64 = token.split(".")[0]!.replace(/-/g, "+").replace(/_/g, "/");
    const payload = JSON.parse(atob(b64 + "===".slice((b64.length + 3) % 4))) as { exp?: unknown };
    return typeof payload.exp === "number" && payload.exp * 1000 - 30_000 <= now;
  } catch {
    return false;
  }
}
