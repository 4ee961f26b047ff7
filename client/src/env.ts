//! The outside world the client touches (time, randomness, sockets, storage),
//! gathered in one injectable object so tests run on a fake clock and sockets.

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

/** A WebSocket constructor (the browser's, or a fake). */
export type SocketFactory = new (url: string) => SocketLike;

/** The subset of Web Storage the client uses. */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export type TimerHandle = unknown;

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

/** The browser's environment, with any part replaced by `overrides`. */
export function resolveEnv(overrides: Partial<Env> = {}): Env {
  const g = globalThis as unknown as { WebSocket?: SocketFactory };
  const env: Env = {
    now: () => Date.now(),
    setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
    clearTimeout: (h) => globalThis.clearTimeout(h as ReturnType<typeof globalThis.setTimeout>),
    random: Math.random,
    randomBytes: defaultRandomBytes,
    WebSocket: g.WebSocket as SocketFactory,
    sessionStorage: "sessionStorage" in overrides ? null : storage("sessionStorage"),
    localStorage: "localStorage" in overrides ? null : storage("localStorage"),
    ...overrides,
  };
  if (typeof env.WebSocket !== "function") {
    throw new TypeError("homeroom: no WebSocket in this environment; pass env.WebSocket");
  }
  return env;
}
