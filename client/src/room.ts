//! The room handle: one logical connection to a room that survives socket
//! drops. Owns the connect/reconnect cycle (start, manual reconnect, reopen
//! after close, reconnect on the page's wake-ups), resume (since/epoch,
//! replay, resync, gap detection), the room state and presence snapshots,
//! the local checks against the room's limits, and the mapping of acks and
//! errors to the promises of durable sends. Building one touches nothing of
//! the page: that waits for `start()`.

import { DEFAULT_BACKOFF, plan, spreadMs, type BackoffOptions, type Cause, type StopWhy } from "./backoff.js";
import { bytePaceFor, DEFAULT_RATE, paceFor, type RateOptions } from "./bucket.js";
import { Emitter } from "./emitter.js";
import { detachSocket, OPEN, resolveEnv, type Env, type SocketLike, type TimerHandle, type WakeWhy } from "./env.js";
import { HomeroomError } from "./errors.js";
import { DEFAULT_HEARTBEAT, Heartbeat, type HeartbeatOptions } from "./heartbeat.js";
import { byteLength, jsonDepth } from "./json.js";
import { PresenceStore, type Presence } from "./presence.js";
import {
  CLOSE,
  DEFAULT_LIMITS,
  markEcho,
  PING,
  STATE_TOPIC,
  type Json,
  type Limits,
  type MessageFrame,
  type ServerFrame,
  type SignalFrame,
  type StateEntry,
  type Summary,
  type WelcomeFrame,
} from "./protocol.js";
import { DEFAULT_REGIONS, EndpointChooser, wsBase, type RegionOptions } from "./regions.js";
import { Sender } from "./sender.js";
import { claimSession, freshSession, IdMaker, releaseSession, replacedSession, tabSession, validSession } from "./session.js";
import { frozenStatus, IDLE_STATUS, sameStatus, type Status } from "./status.js";

export type { ConnectionState, Status } from "./status.js";

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
  /**
   * Pacing: the share of the room's limits to use (`headroom`, default 0.8),
   * optional caps of its own (`burst`, `perSec`), and the latest-wins
   * intervals (`presenceIntervalMs` 100, `signalIntervalMs` 50).
   */
  rate?: Partial<RateOptions>;
  /** A connect that has no welcome by then is abandoned, ms. Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * `connect()` starts the connection at once unless this is false; then
   * call `room.start()` (what the React hooks do, in an effect).
   */
  autoConnect?: boolean;
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
const CLIENT_CLOSE = { GAP: 4000, HEARTBEAT: 4002, TIMEOUT: 4003, RECONNECT: 4004 } as const;

/** `WebSocket.CLOSING`: a close frame was exchanged, the close event is still to come. */
const CLOSING = 2;

/** How long past the connect timeout a socket the server is closing may take to report why. */
const CLOSING_GRACE_MS = 30_000;

export class Room {
  readonly room: string;
  /** The kind of room (its path segment). */
  readonly kind: string;

  private readonly env: Env;
  private readonly events = new Emitter<RoomEvents>();
  private readonly ids: IdMaker;
  private readonly sender: Sender;
  private readonly rate: RateOptions;
  private readonly heartbeat: Heartbeat;
  private readonly backoffOpts: BackoffOptions;
  private readonly connectTimeoutMs: number;
  private readonly presenceStore = new PresenceStore();
  private readonly stateMap = new Map<string, StateEntry>();
  /** The endpoints given (null: the page's origin, looked up at start). */
  private readonly endpoints: readonly string[] | null;
  private readonly probeOpts: RegionOptions;
  private chooserOrNull: EndpointChooser | null = null;
  /** The limits of the last welcome (the server's defaults before one). */
  private limitsNow: Readonly<Limits> = DEFAULT_LIMITS;

  private socket: SocketLike | null = null;
  /** Bumped for every connect attempt; callbacks of older attempts are ignored. */
  private generation = 0;
  private started = false;
  private welcomed = false;
  private everOpen = false;
  private closedForGood = false;
  private retryTimer: TimerHandle | null = null;
  /** The pending retry is a long wait the room asked for (4029, 4429): a wake-up does not cut it short. */
  private retryImposed = false;
  private connectTimer: TimerHandle | null = null;
  private rewriteTimer: TimerHandle | null = null;
  private stateTimer: TimerHandle | null = null;
  private stopWake: (() => void) | null = null;
  private attempt = 0;
  private welcomedAt: number | null = null;
  /** 4401 and 4409 closes since the last welcome. */
  private authRefusals = 0;
  private sessionTaken = 0;

  /** Resolved at start (sessionStorage), unless given. */
  private sessionId: string | null;
  /** The session came from sessionStorage (a fresh one replaces it there). */
  private sessionStored: boolean;
  /** The claim of the tab's session, until it settles (`claim`). */
  private claiming: Promise<void> | null = null;
  /** The session this Room claimed for its room in this page, to release at close. */
  private claimed: string | null = null;

  private token: string | undefined;
  private readonly getToken: (() => string | Promise<string>) | undefined;
  private needToken: boolean;

  // Resume cursor: valid once a state snapshot (state/resync) was applied.
  private seqApplied = 0;
  private epoch: string | null = null;
  private baseline = false;
  private replayUntil = 0;
  private myPresence: Record<string, Json> | null;

  // Snapshots: the same object until something they show changes.
  private statusSnap: Readonly<Status> = IDLE_STATUS;
  private stateSnap: ReadonlyMap<string, StateEntry> | null = null;

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
    if (opts.session !== undefined && !validSession(opts.session)) {
      throw new TypeError("homeroom: session must be 8-64 chars of A-Z a-z 0-9 _ -");
    }
    // Nothing below reads the page: the environment resolves lazily.
    this.env = resolveEnv(opts.env);
    this.sessionId = opts.session ?? null;
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

    const given = opts.regions?.length ? [...opts.regions] : opts.url !== undefined ? [opts.url] : null;
    given?.forEach(wsBase); // throws early on a bad URL
    this.endpoints = given;
    this.probeOpts = { ...DEFAULT_REGIONS, ...opts.probe };
    this.rate = { ...DEFAULT_RATE, ...opts.rate };
    const [pace, bytes] = [paceFor(DEFAULT_LIMITS, this.rate), bytePaceFor(DEFAULT_LIMITS, this.rate)];
    this.sender = new Sender(this.env, this.rate, pace, bytes, (text) => this.write(text));
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
   * Calls `fn` after anything the snapshots (`status`, `presence`, `state`)
   * show may have changed; returns the unsubscribe. For
   * `useSyncExternalStore` and other stores: read the snapshot in `fn`.
   */
  subscribe(fn: () => void): () => void {
    const offs = (["status", "presence", "summary", "state", "resync"] as const).map((e) => this.on(e, fn));
    return () => offs.forEach((off) => off());
  }

  /**
   * This tab's session. Fixed for the handle's life, except after a 4409
   * (the id belongs to another user): then a fresh one. Read before
   * `start()`, it is looked up (sessionStorage) then.
   */
  get session(): string {
    return (this.sessionId ??= tabSession(this.env));
  }

  /** The room state, key to value and version: an immutable snapshot (the same Map until a key changes). */
  get state(): ReadonlyMap<string, StateEntry> {
    return (this.stateSnap ??= new Map(this.stateMap));
  }

  /** Who is here: an immutable snapshot (the same object until presence changes). */
  get presence(): Presence {
    return this.presenceStore.snapshot();
  }

  /** The connection's status: a frozen snapshot, the same object until a field changes. */
  get status(): Status {
    const now: Status = {
      ...this.info,
      state: this.closedForGood
        ? "closed"
        : !this.started
          ? "idle"
          : this.welcomed
          ? "open"
          : this.everOpen
            ? "reconnecting"
            : "connecting",
      endpoint: this.chooserOrNull?.current ?? null,
      endpointChoice: this.chooserOrNull?.lastWhy ?? null,
      seq: this.seqApplied,
      epoch: this.epoch,
      attempt: this.attempt,
      pending: this.sender.outbox.size,
      session: this.sessionId ?? "",
    };
    if (!sameStatus(now, this.statusSnap)) this.statusSnap = frozenStatus(now);
    return this.statusSnap;
  }

  /** The limits the room announced in the last welcome (the server's defaults before one). */
  get limits(): Readonly<Limits> {
    return this.limitsNow;
  }

  /** The highest seq applied. */
  get seq(): number {
    return this.seqApplied;
  }

  /**
   * A durable message: resolves with its seq once the room stored it. Kept
   * and resent across reconnects until then. Paced under the room's limits
   * (see the README's "Pacing"); refused at once (`too_large`, `invalid`)
   * when the room would refuse it.
   */
  publish(topic: string, data: Json): Promise<number> {
    if (!validTopic(topic)) {
      return Promise.reject(new HomeroomError("invalid", "topic must be 1-64 chars, not starting with $"));
    }
    const id = this.ids.next();
    return this.durable(id, JSON.stringify({ type: "publish", id, topic, data }), "data");
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
    return this.durable(id, JSON.stringify(frame), "value");
  }

  /**
   * An ephemeral message to the other connections, latest wins per topic:
   * while connected, the newest `data` of a topic goes out no more than
   * every `signalIntervalMs` (50 ms) and as the bucket allows, and the last
   * one always goes (trailing edge). Returns whether it was taken (false
   * while not connected: signals are never queued across connections).
   * Throws a `HomeroomError` (`too_large`, `invalid`) for a frame the room
   * would refuse.
   */
  signal(topic: string, data: Json): boolean {
    if (!validTopic(topic)) return false;
    const text = JSON.stringify({ type: "signal", topic, data });
    this.check(text, "data");
    if (!this.welcomed) return false;
    return this.sender.signal(topic, text);
  }

  /**
   * Replaces this session's presence state: kept, and sent again on every
   * connect. Latest wins: at most one presence frame every
   * `presenceIntervalMs` (100 ms) and as the bucket allows, the last state
   * always. The local view (`presence`) changes at once. Throws a
   * `HomeroomError` `too_large` over the room's `presence_max` (1 KiB).
   */
  setPresence(state: Record<string, Json>): void {
    const text = JSON.stringify({ type: "presence", state });
    this.checkPresence(text, state);
    this.myPresence = state;
    if (!this.welcomed) return;
    this.sender.presence(text);
    if (this.presenceStore.updateSelf(this.session, state)) {
      this.events.emit("presence", { joins: [this.session], leaves: [], reset: false, presence: this.presence });
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

  /**
   * Closes for good: no reconnect; unacknowledged sends reject with
   * `closed`. `start()` or `reconnect()` opens it again (same session,
   * resuming where it was).
   */
  close(): void {
    if (this.closedForGood) return;
    if (this.claimed !== null && this.env.locks) {
      releaseSession(this.env.locks, this.claimed, `${this.kind}/${this.room}`);
      this.claimed = null;
    }
    const s = this.socket;
    this.detach();
    if (s) safeClose(s, 1000, "client closed");
    this.finish("closed", new HomeroomError("closed", "the room handle was closed"));
  }

  // ---- connect cycle ------------------------------------------------------

  /**
   * Starts connecting (`connect()` calls it unless `autoConnect: false`).
   * The first call reads the page (WebSocket, sessionStorage, the page's
   * origin) and listens for its `online` and `visibilitychange` events. On
   * a room closed for good (by `close()` or the server), it opens it again:
   * same session, resuming from the last seq applied. A no-op while running.
   */
  start(): void {
    if (this.started && !this.closedForGood) return;
    void this.env.WebSocket; // no WebSocket here: throw now, not in a retry loop
    this.session; // looked up now (sessionStorage), then fixed
    this.claiming ??= this.claim();
    this.ids.prime();
    this.started = true;
    if (this.closedForGood) {
      this.closedForGood = false;
      this.attempt = 0;
      this.authRefusals = 0;
      this.sessionTaken = 0;
      this.info.why = null;
    }
    this.stopWake ??= this.env.onWake?.((why) => this.wake(why)) ?? null;
    this.open();
  }

  /**
   * Drops the current socket (if any) and connects again at once, resuming
   * from the last seq applied. Starts the room if it was never started or
   * was closed for good.
   */
  reconnect(): void {
    if (!this.started || this.closedForGood) {
      this.start();
      return;
    }
    const s = this.socket;
    this.detach();
    if (s) safeClose(s, CLIENT_CLOSE.RECONNECT, "reconnect");
    this.chooser.disconnected();
    this.open();
  }

  /**
   * The page came back online or became visible: a room waiting out a
   * backoff connects at once (not one waiting out a room's 4029/4429); an
   * open one checks its socket at once (a ping whose pong must come soon),
   * since a sleep or a network change can leave it dead but open.
   */
  private wake(_why: WakeWhy): void {
    if (!this.started || this.closedForGood) return;
    if (this.welcomed) {
      this.heartbeat.checkNow();
      return;
    }
    if (this.retryTimer === null || this.retryImposed) return;
    this.env.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.open();
  }

  private get chooser(): EndpointChooser {
    return (this.chooserOrNull ??= new EndpointChooser(this.env, this.endpoints ?? [pageOrigin()], this.probeOpts));
  }

  /**
   * One connect attempt: choose the endpoint, get a token if needed, open
   * the socket. Synchronous unless probing or `getToken` has to be awaited.
   */
  private open(): void {
    this.retryTimer = null;
    this.retryImposed = false;
    this.info.retryAt = null;
    const gen = ++this.generation;
    const stale = (): boolean => gen !== this.generation || this.closedForGood;
    if (this.claiming) {
      // The first connect waits for the session's claim (a lock: a moment).
      void this.claiming.then(() => {
        if (!stale()) this.open();
      });
      return;
    }
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
      // Bounded like the connect itself: a token fetch that never settles (a request lost in a
      // network change) left the room connecting for good, with nothing to retry it.
      let settled = false;
      const timer = this.env.setTimeout(() => {
        if (settled) return;
        settled = true;
        failed(new HomeroomError("timeout", `getToken did not settle in ${this.connectTimeoutMs} ms`));
      }, this.connectTimeoutMs);
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        this.env.clearTimeout(timer);
        return true;
      };
      void Promise.resolve(token).then(
        (t) => {
          const late = !settle();
          if (late && !this.closedForGood && typeof t === "string") {
            // Kept for the next attempt: a token fetch slower than the connect timeout
            // still connects, one attempt later.
            this.token = t;
            this.needToken = false;
          }
          if (late || stale()) return;
          this.token = t;
          this.needToken = false;
          this.dial(gen, endpoint);
        },
        (error: unknown) => {
          if (settle()) failed(error);
        },
      );
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
    const timedOut = (grace: boolean) => {
      if (gen !== this.generation) return;
      // The server already closed it (a refusal: its close frame came, and the close event waits
      // for the TCP connection to end, which some runtimes hold open for seconds): wait for the
      // code and reason once more rather than call it a timeout and retry a refusal for ever.
      if (!grace && socket.readyState === CLOSING) {
        this.connectTimer = this.env.setTimeout(() => timedOut(true), CLOSING_GRACE_MS);
        return;
      }
      this.fail({ kind: "timeout" }, CLIENT_CLOSE.TIMEOUT);
    };
    this.connectTimer = this.env.setTimeout(() => timedOut(false), this.connectTimeoutMs);
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
      // Frozen, and new for every close: a snapshot's lastClose changes identity only with a new close.
      this.info.lastClose = Object.freeze({ code: ev.code, reason: ev.reason ?? "" });
      this.fail({ kind: "close", code: ev.code, reason: ev.reason, welcomed: this.welcomed });
    };
    socket.onerror = () => {
      // The close event follows with the code; nothing to do here.
    };
  }

  private roomUrl(endpoint: string): string {
    const q = new URLSearchParams({ session: this.session });
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
    if (s) detachSocket(s);
    this.welcomed = false;
    this.heartbeat.stop();
    this.sender.pause();
    for (const t of [this.connectTimer, this.rewriteTimer, this.retryTimer, this.stateTimer]) {
      if (t !== null) this.env.clearTimeout(t);
    }
    this.connectTimer = this.rewriteTimer = this.retryTimer = this.stateTimer = null;
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
      spreadMs: spreadMs(this.presence.summary.members, this.limitsNow.reconnect_rate),
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
    this.retryImposed = cause.kind === "close" && (cause.code === CLOSE.RATE_ABUSE || cause.code === CLOSE.TOO_MANY_CONNECTIONS);
    this.retryTimer = this.env.setTimeout(() => this.open(), next.delay);
    this.emitStatus();
  }

  /**
   * The session id belongs to another user (4409): switch to a fresh one.
   * The resume cursor (room-wide), the outbox (its ids are random-prefixed)
   * and this tab's presence state are kept.
   */
  private renewSession(): void {
    this.sessionId = freshSession(this.env, this.sessionStored, this.session);
  }

  /**
   * Claims the tab's session for this room before the first connect (only a session read from
   * sessionStorage, and only where the page has Web Locks). Held by another tab (a duplicated
   * tab copies sessionStorage): this tab takes a fresh one, stored for its reloads. Used for the
   * same room by another Room of this page: this Room takes a fresh one of its own, not stored.
   * Without it the room closed the older of two holders 4001 (superseded), which stops for good.
   */
  private claim(): Promise<void> | null {
    const locks = this.env.locks;
    if (!locks || !this.sessionStored || this.claimed !== null) return null;
    const room = `${this.kind}/${this.room}`;
    const settle = async (): Promise<void> => {
      // At most three tries: the tab's session, the page's replacement for it (another tab
      // held it), a fresh one of this Room's own (this page has the room under either).
      for (let tries = 0; tries < 3; tries++) {
        const got = await claimSession(locks, this.session, room, this.env, () => !this.closedForGood);
        if (got === "gone") break;
        if (got === "mine") {
          this.claimed = this.session;
          break;
        }
        const old = this.session;
        if (got === "other-tab" && this.sessionStored) {
          this.sessionId = replacedSession(locks, old, () => freshSession(this.env, true, old));
        } else {
          this.sessionId = freshSession(this.env, false, old);
          this.sessionStored = false;
        }
      }
      // Closed while the claim was pending (React's StrictMode closes a Room at once): the
      // room is not this Room's to hold, or a later Room for it would take a session of its own.
      if (this.closedForGood && this.claimed !== null) {
        releaseSession(locks, this.claimed, room);
        this.claimed = null;
      }
    };
    return settle()
      .catch(() => {})
      .finally(() => {
        this.claiming = null;
      });
  }

  private finish(why: string, err: HomeroomError): void {
    this.detach();
    this.closedForGood = true;
    this.info.why = why;
    this.info.retryAt = null;
    this.stopWake?.();
    this.stopWake = null;
    this.sender.outbox.rejectAll(err);
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
        this.sender.stateAsked = false;
        this.events.emit("resync", { reason: "initial", seq: f.seq });
        this.emitStatus();
        return;
      case "ack":
        if (this.sender.outbox.ack(f.id, f.seq)) this.emitStatus();
        return;
      case "error":
        return this.onError(f);
      case "signal":
        this.events.emit("signal", f);
        return;
      case "presence": {
        const { joins, leaves } = this.presenceStore.apply(f);
        this.repace();
        this.events.emit("presence", { joins, leaves, reset: f.reset === true, presence: this.presence });
        return;
      }
      case "summary":
        this.presenceStore.setSummary(f);
        this.events.emit("summary", this.presence.summary);
        return;
      case "pong":
        this.heartbeat.pong();
        return;
      case "mark":
        // Flow control: echo at once, verbatim, straight to the socket (not
        // paced by the sender: the room does not count echoes against the
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
    this.limitsNow = limitsOf(f.limits);
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
    this.repace();
    this.heartbeat.start();
    this.sender.resume(!askedResume);
    const mine = f.presence?.members?.[this.session];
    if (this.myPresence && (!mine || JSON.stringify(mine.state) !== JSON.stringify(this.myPresence))) {
      this.sender.presence(JSON.stringify({ type: "presence", state: this.myPresence }));
      this.presenceStore.updateSelf(this.session, this.myPresence);
    }
    this.events.emit("presence", { joins: [...this.presenceStore.members.keys()], leaves: [], reset: true, presence: this.presence });
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
      if (!had || had.version < version) {
        this.stateMap.set(key, Object.freeze({ value, version }));
        this.stateSnap = null;
      }
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
    if (f.id !== undefined && this.sender.outbox.fail(f.id, err)) {
      this.emitStatus();
      return; // the send's promise carries it
    }
    if (f.code === "rate_limited" && this.sender.stateAsked && !this.baseline && this.stateTimer === null) {
      // The room answers a get_state in order, before any frame sent after it: a refusal while
      // its answer is awaited is the get_state's (its reply budget was spent, by other tabs of
      // the user, say). Unasked again, this connection never had a baseline, and the next
      // reconnect could not resume: it started afresh, past the messages missed meanwhile.
      this.sender.stateAsked = false;
      this.stateTimer = this.env.setTimeout(
        () => {
          this.stateTimer = null;
          if (!this.baseline) this.sender.askState();
        },
        1000 + this.env.random() * 1000,
      );
    }
    if (f.code === "rate_limited" && this.rewriteTimer === null && this.sender.outbox.size > 0) {
      // The refused frame is not named: write the unacked sends again soon
      // (the room answers the ones it already has with their original ack).
      this.rewriteTimer = this.env.setTimeout(
        () => {
          this.rewriteTimer = null;
          this.sender.rewrite();
        },
        1000 + this.env.random() * 1000,
      );
    }
    this.events.emit("error", err);
  }

  private durable(id: string, text: string, what: "data" | "value"): Promise<number> {
    if (this.closedForGood) return Promise.reject(new HomeroomError("closed", "the room handle is closed"));
    try {
      this.check(text, what, id);
    } catch (e) {
      return Promise.reject(e);
    }
    const p = this.sender.durable(id, text);
    this.emitStatus();
    return p;
  }

  /**
   * Refuses here what the room would refuse (a frame over `max_frame`,
   * a payload nested deeper than `max_depth`), by the last welcome's limits:
   * a typed error for the caller instead of a refusal or a close later.
   */
  private check(text: string, what: string, id?: string): void {
    const extra = id === undefined ? {} : { id };
    const max = this.limitsNow.max_frame;
    if (byteLength(text) > max) throw new HomeroomError("too_large", `frame over ${max} bytes`, extra);
    // The frame is an object of scalars around one payload: one level more than it.
    if (jsonDepth(text) - 1 > this.limitsNow.max_depth) {
      throw new HomeroomError("invalid", `${what} nested deeper than ${this.limitsNow.max_depth}`, extra);
    }
  }

  private checkPresence(text: string, state: Record<string, Json>): void {
    if (typeof state !== "object" || state === null || Array.isArray(state)) {
      throw new HomeroomError("invalid", "presence state must be an object");
    }
    this.check(text, "presence state");
    const max = this.limitsNow.presence_max;
    if (byteLength(JSON.stringify(state)) > max) throw new HomeroomError("too_large", `presence state over ${max} bytes`);
  }

  /** Paces the sender by the room's limits and this user's share of them. */
  private repace(): void {
    const user = this.info.user;
    const sharers = this.presenceStore.large || user === null ? 1 : this.presenceStore.sessionsOf(user);
    const pace = paceFor(this.limitsNow, this.rate, sharers);
    const bytes = bytePaceFor(this.limitsNow, this.rate, sharers);
    const [now, nowBytes] = [this.sender.bucket.current, this.sender.bytes.current];
    const same = (a: typeof pace, b: typeof pace) => a.perSec === b.perSec && a.burst === b.burst;
    if (!same(pace, now) || !same(bytes, nowBytes)) this.sender.setPace(pace, bytes);
  }

  private replaceState(state: Record<string, StateEntry> | undefined): void {
    this.stateMap.clear();
    for (const [k, v] of Object.entries(state ?? {})) this.stateMap.set(k, Object.freeze({ value: v.value, version: v.version }));
    this.stateSnap = null;
  }

  private emitStatus(): void {
    this.events.emit("status", this.status);
  }
}

/** The welcome's limits over the defaults; a field that is not a positive number keeps its default. */
function limitsOf(given: Partial<Limits> | undefined): Readonly<Limits> {
  if (!given) return DEFAULT_LIMITS;
  const out: Limits = { ...DEFAULT_LIMITS };
  for (const k of Object.keys(out) as Array<keyof Limits>) {
    const v = given[k];
    if (typeof v === "number" && Number.isFinite(v) && v > 0) out[k] = v;
  }
  return Object.freeze(out);
}

function validTopic(topic: unknown): topic is string {
  return typeof topic === "string" && topic.length >= 1 && topic.length <= TOPIC_MAX && !topic.startsWith("$");
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


function pageOrigin(): string {
  const loc = (globalThis as { location?: { origin?: string } }).location;
  if (loc?.origin && loc.origin !== "null") return loc.origin;
  throw new TypeError("homeroom: pass `url` or `regions` (no page origin here)");
}

/**
 * A room token's `exp` has passed (or is within 30 s). Reads a JWT's
 * payload (the middle part) and the older two-part format's (the first).
 * Unknown formats never expire.
 */
export function tokenExpired(token: string | undefined, now: number): boolean {
  if (token === undefined) return false;
  try {
    const parts = token.split(".");
    const b64 = parts[parts.length === 3 ? 1 : 0]!.replace(/-/g, "+").replace(/_/g, "/");
    const payload = JSON.parse(atob(b64 + "===".slice((b64.length + 3) % 4))) as { exp?: unknown };
    return typeof payload.exp === "number" && payload.exp * 1000 - 30_000 <= now;
  } catch {
    return false;
  }
}
