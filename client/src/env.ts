//! The outside world the client touches (time, randomness, sockets, storage,
//! the page's online/visibility events), gathered in one injectable object so
//! tests run on a fake clock and sockets. Resolved lazily: building a Room
//! (during server-side rendering, say) reads no `WebSocket`, storage, `window`
//! or `document` until it is started.

/** The subset of the browser WebSocket the client uses. */
export interface SocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string; wasClean?: boolean }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/**
 * Drops a socket's callbacks before it is closed or abandoned. `onerror`
 * stays a no-op rather than null: Node's `ws` emits `error` when a socket
 * still connecting is closed, and an `error` with no listener throws out of
 * the timer that closed it (a probe or connect timeout would kill the process).
 */
export function detachSocket(s: SocketLike): void {
  s.onopen = s.onmessage = s.onclose = null;
  s.onerror = ignore;
}

function ignore(): void {}

/** A WebSocket constructor (the browser's, or a fake). */
export type SocketFactory = new (url: string) => SocketLike;

/** The subset of Web Storage the client uses. */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export type TimerHandle = unknown;

/** Why the page says now is a good time to reconnect. */
export type WakeWhy = "online" | "visible";

/**
 * Subscribes to the page's wake-ups (the browser's `online` event, a hidden
 * tab becoming visible); returns the unsubscribe.
 */
export type WakeSource = (fn: (why: WakeWhy) => void) => () => void;

/** Everything the client reads from its surroundings. */
export interface Env {
  /** Wall-clock milliseconds (Date.now). */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
  /** Uniform in [0, 1): every delay's jitter comes from here. */
  random(): number;
  /** Fills `bytes` with unguessable randomness (session ids, client ids). */
  randomBytes(bytes: Uint8Array): Uint8Array;
  WebSocket: SocketFactory;
  /** Per tab: the session id lives here. `null` when unavailable. */
  sessionStorage: StorageLike | null;
  /** Per origin: the chosen region endpoint lives here. `null` when unavailable. */
  localStorage: StorageLike | null;
  /** The page's wake-ups; `null` off a page (server, worker, Node). */
  onWake: WakeSource | null;
  /**
   * The origin's Web Locks (`navigator.locks`): a tab claims its session with one, so that a
   * duplicated tab (which copies sessionStorage) takes a session of its own. Absent or `null`:
   * no claim (off a page, or a browser without them).
   */
  locks?: LocksLike | null;
}

/** The subset of the Web Locks API the client uses. */
export interface LocksLike {
  request(name: string, options: { ifAvailable: boolean }, callback: (lock: unknown) => unknown): Promise<unknown>;
}

export const OPEN = 1;

/** Web Storage can throw (privacy modes, sandboxed frames): treat that as absent. */
function storage(name: "sessionStorage" | "localStorage"): StorageLike | null {
  try {
    const s = (globalThis as Record<string, unknown>)[name] as StorageLike | undefined;
    if (!s) return null;
    const probe = "homeroom.probe";
    s.setItem(probe, "1");
    s.removeItem(probe);
    return s;
  } catch {
    return null;
  }
}

function defaultRandomBytes(bytes: Uint8Array): Uint8Array {
  const c = (globalThis as { crypto?: { getRandomValues?(b: Uint8Array): Uint8Array } }).crypto;
  if (c && typeof c.getRandomValues === "function") return c.getRandomValues(bytes);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  return bytes;
}

/** `online` on window, `visibilitychange` to visible on document, if there is a page. */
function pageWake(): WakeSource | null {
  const g = globalThis as unknown as {
    window?: { addEventListener(t: string, f: () => void): void; removeEventListener(t: string, f: () => void): void };
    document?: {
      visibilityState?: string;
      addEventListener(t: string, f: () => void): void;
      removeEventListener(t: string, f: () => void): void;
    };
  };
  const win = g.window;
  const doc = g.document;
  if (!win || typeof win.addEventListener !== "function") return null;
  return (fn) => {
    const online = (): void => fn("online");
    const visible = (): void => {
      if (doc?.visibilityState === "visible") fn("visible");
    };
    win.addEventListener("online", online);
    doc?.addEventListener("visibilitychange", visible);
    return () => {
      win.removeEventListener("online", online);
      doc?.removeEventListener("visibilitychange", visible);
    };
  };
}

/** Defines `key` on `env` as computed on first read (then kept). */
function lazy<K extends keyof Env>(env: Env, key: K, make: () => Env[K]): void {
  Object.defineProperty(env, key, {
    configurable: true,
    enumerable: true,
    get() {
      const value = make();
      Object.defineProperty(env, key, { value, writable: true, enumerable: true, configurable: true });
      return value;
    },
  });
}

/**
 * The browser's environment, with any part replaced by `overrides`. Nothing
 * of the page is read here: `WebSocket`, the storages and the wake-up source
 * are looked up on first use (a missing `WebSocket` throws then).
 */
export function resolveEnv(overrides: Partial<Env> = {}): Env {
  const env = {
    now: () => Date.now(),
    setTimeout: (fn: () => void, ms: number) => globalThis.setTimeout(fn, ms),
    clearTimeout: (h: TimerHandle) => globalThis.clearTimeout(h as ReturnType<typeof globalThis.setTimeout>),
    random: Math.random,
    randomBytes: defaultRandomBytes,
  } as Env;
  lazy(env, "WebSocket", () => {
    const ws = (globalThis as unknown as { WebSocket?: SocketFactory }).WebSocket;
    if (typeof ws !== "function") throw new TypeError("homeroom: no WebSocket in this environment: pass env.WebSocket (Node 20: run node --experimental-websocket, or pass the ws package's WebSocket; Node 22 has one)");
    return ws;
  });
  lazy(env, "sessionStorage", () => storage("sessionStorage"));
  lazy(env, "localStorage", () => storage("localStorage"));
  lazy(env, "onWake", pageWake);
  lazy(env, "locks", () => (globalThis as { navigator?: { locks?: LocksLike } }).navigator?.locks ?? null);
  for (const [key, value] of Object.entries(overrides)) {
    Object.defineProperty(env, key, { value, writable: true, enumerable: true, configurable: true });
  }
  return env;
}
