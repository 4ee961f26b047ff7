/**
 * `homeroom/yjs`: the stock `y-websocket` provider for homeroom's document kinds
 * (PROTOCOL-DOCUMENTS.md), with what it lacks there:
 *
 * - **saved**: the room says when an update is stored (the `saved` extension), so
 *   `provider.saved` is `true` only when every local edit is in the room's storage, not merely
 *   sent; `on("saved", ...)` hears it change;
 * - **refusals you can see**: `on("refused", ({ index, code }) => ...)` for an update the room
 *   refused (`read_only`, `document_too_large`, ...);
 * - **a fresh token for every connect**: `token` may be a function, called before each connect
 *   and again when the room refuses the token (4401), up to three refusals in a row;
 * - **jittered reconnects**: after a drop, a full-jitter backoff (homeroom's client defaults:
 *   0 to 2 s, doubling to 20 s), so a deploy's reconnect storm spreads out; closes a reconnect
 *   cannot cure (4400-4499 but 4401) end it, with a `closed` event;
 * - **the nearest region**: given several `endpoints` of the deployment, the first connect
 *   probes them all (`/probe`) and keeps the first to answer for a day, as homeroom's client
 *   does; a reconnect within a minute of a drop goes back to the same one.
 *
 * ```ts
 * import * as Y from "yjs";
 * import { DocProvider } from "homeroom/yjs";
 * const doc = new Y.Doc();
 * const provider = new DocProvider("wss://example.com/docs", "my-doc", doc, {
 *   token: () => fetch("/token?doc=my-doc").then((r) => r.text()),
 * });
 * provider.on("saved", (saved) => (indicator.textContent = saved ? "saved" : "saving"));
 * ```
 */

import { WebsocketProvider } from "y-websocket";
import type * as Y from "yjs";

import { DEFAULT_BACKOFF } from "./backoff.js";
import type { Env, StorageLike } from "./env.js";
import { DEFAULT_REGIONS, EndpointChooser, wsBase, type RegionOptions } from "./regions.js";

/** The extension messages' tags (PROTOCOL-DOCUMENTS.md). */
const SAVED = 100;
/** How long a token function may take before the connect is retried (as a room's connect). */
const TOKEN_TIMEOUT_MS = 10_000;

/** `value`, or a rejection if it has not settled in `ms`: a token fetch that never settles (a
 *  request lost in a network change) must not leave the provider connecting for good. */
function within<T>(value: T | Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the token did not come in ${ms} ms`)), ms);
    Promise.resolve(value).then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
const REFUSED = 101;

export interface DocProviderOptions {
  /** The member's token, or a function giving a fresh one (called before every connect). */
  token?: string | (() => string | Promise<string>);
  /** A WebSocket constructor (Node 20 has none: the `ws` package's). */
  WebSocketPolyfill?: typeof WebSocket;
  /** Connect at once (default `true`). */
  connect?: boolean;
  /** The reconnect backoff's first ceiling and its cap (ms). */
  baseMs?: number;
  capMs?: number;
  /**
   * Several endpoints of the deployment (origins, e.g. `https://eu.example.com`): probed at the
   * first connect, the first to answer kept for a day (`localStorage`), the same one again
   * within a minute of a drop. The server URL's path (the kind, e.g. `/docs`) is kept.
   */
  endpoints?: string[];
  /** The probing's tuning (`probeTimeoutMs`, `pinTtlMs`, `stickyMs`), as the room client's `probe`. */
  probe?: Partial<RegionOptions>;
}

/** An update the room refused: its number on the socket (1-based; 0: not an update) and why. */
export interface Refusal {
  index: number;
  code: string;
}

interface Decoder {
  arr: Uint8Array;
  pos: number;
}

function readVarUint(d: Decoder): number {
  let num = 0;
  let mult = 1;
  for (;;) {
    const r = d.arr[d.pos++] ?? 0;
    num += (r & 127) * mult;
    mult *= 128;
    if (r < 128) return num;
  }
}

function readVarString(d: Decoder): string {
  const len = readVarUint(d);
  const bytes = d.arr.subarray(d.pos, d.pos + len);
  d.pos += len;
  return new TextDecoder().decode(bytes);
}

/** What the endpoint chooser touches (homeroom's client's `Env`, its probing part only). */
function probeEnv(WebSocketPolyfill?: typeof WebSocket): Env {
  let localStorage: StorageLike | null = null;
  try {
    localStorage = (globalThis as { localStorage?: StorageLike }).localStorage ?? null;
  } catch {
    // storage refused (privacy modes): a probe at every page load
  }
  return {
    now: Date.now,
    setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
    clearTimeout: (h: unknown) => clearTimeout(h as ReturnType<typeof setTimeout>),
    WebSocket: WebSocketPolyfill ?? WebSocket,
    localStorage,
  } as unknown as Env;
}

/** Closes in 4400-4499 a reconnect cannot cure (4401 can: a new token). */
const final = (code: number) => code >= 4400 && code < 4500 && code !== 4401;

export class DocProvider extends WebsocketProvider {
  /** Update messages sent on the current socket, and how many of them the room answered. */
  private sentOnSocket = 0;
  private answered = 0;
  /** An update message of the current socket was refused: its change is kept here only. */
  private refusedOnSocket = false;
  /** Local edits made while no socket was open (the next sync carries them). */
  private offlineEdits = false;
  private wanted: boolean;
  private attempt = 0;
  private tokenRefusals = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly token: DocProviderOptions["token"];
  private readonly baseMs: number;
  private readonly capMs: number;
  /** Chooses among `endpoints`, when given; the kind's path under each. */
  private readonly chooser: EndpointChooser | null = null;
  private readonly kindPath: string;
  /** Whether every local edit is stored in the room. */
  saved = true;

  constructor(serverUrl: string, room: string, doc: Y.Doc, options: DocProviderOptions = {}) {
    super(serverUrl, room, doc, {
      connect: false,
      params: { homeroom: "1" },
      // No tab-to-tab channel: every edit goes through the room, which stores it, says so, and
      // applies its rules (a read-only tab's edit would otherwise reach a writing tab of the
      // same origin, which would send it on as its own).
      disableBc: true,
      ...(options.WebSocketPolyfill ? { WebSocketPolyfill: options.WebSocketPolyfill } : {}),
      // Every close comes to us (`connection-close`): we choose whether and when to reconnect.
      shouldReconnect: () => false,
    });
    this.token = options.token;
    this.baseMs = options.baseMs ?? DEFAULT_BACKOFF.baseMs;
    this.capMs = options.capMs ?? DEFAULT_BACKOFF.capMs;
    this.wanted = options.connect !== false;
    this.kindPath = new URL(wsBase(serverUrl).replace(/^ws/, "http")).pathname.replace(/\/+$/, "");
    if (options.endpoints?.length) {
      const probe = { ...DEFAULT_REGIONS, ...options.probe };
      this.chooser = new EndpointChooser(probeEnv(options.WebSocketPolyfill), options.endpoints, probe);
    }
    this.messageHandlers[SAVED] = (_e, d) => {
      this.answered = readVarUint(d as unknown as Decoder);
      this.recount();
    };
    this.messageHandlers[REFUSED] = (_e, d) => {
      const dec = d as unknown as Decoder;
      const index = readVarUint(dec);
      // A later `saved n` counts the refused message as answered: without this, an edit the
      // room took after it made `saved` true while the refused change was stored nowhere.
      if (index > 0) {
        this.refusedOnSocket = true;
        this.recount();
      }
      (this as unknown as { emit(n: string, a: unknown[]): void }).emit("refused", [{ index, code: readVarString(dec) }]);
    };
    doc.on("update", (_u: Uint8Array, origin: unknown) => {
      if (origin === this) return;
      if (this.wsconnected) this.sentOnSocket++;
      else this.offlineEdits = true;
      this.recount();
    });
    this.on("status", ({ status }) => {
      if (status === "connected") {
        this.chooser?.connected();
        // The sync step 2 that answers the room's step 1 is the socket's first update message.
        this.sentOnSocket = 1;
        this.answered = 0;
        this.refusedOnSocket = false;
      }
    });
    this.on("sync", (synced: boolean) => {
      // A socket that synced ends a streak of token refusals: each expiry of an hourly token
      // is a 4401, and counted for good the provider stopped at the fourth.
      if (synced) this.attempt = this.tokenRefusals = 0;
    });
    this.on("connection-close", (event: CloseEvent | null) => this.closed(event));
    if (this.wanted) void this.open();
  }

  private recount(): void {
    const saved =
      this.wsconnected && this.answered >= this.sentOnSocket && !this.offlineEdits && !this.refusedOnSocket;
    if (this.wsconnected && this.answered >= 1) this.offlineEdits = false;
    if (saved !== this.saved) {
      this.saved = saved;
      (this as unknown as { emit(n: string, a: unknown[]): void }).emit("saved", [saved]);
    }
  }

  private async open(): Promise<void> {
    if (!this.wanted) return;
    try {
      if (typeof this.token === "function") this.params.token = await within(this.token(), TOKEN_TIMEOUT_MS);
      else if (this.token !== undefined) this.params.token = this.token;
      // The nearest endpoint (a probe at the first connect, after a long outage, or a day on).
      if (this.chooser) this.serverUrl = wsBase(await this.chooser.choose()) + this.kindPath;
    } catch {
      this.later();
      return;
    }
    if (this.wanted) super.connect();
  }

  private closed(event: CloseEvent | null): void {
    this.saved = false;
    this.chooser?.disconnected();
    if (!this.wanted) return;
    const code = event?.code ?? 1006;
    if (final(code)) {
      this.wanted = false;
      return;
    }
    if (code === 4401) {
      this.tokenRefusals++;
      if (typeof this.token !== "function" || this.tokenRefusals > DEFAULT_BACKOFF.maxAuthRefusals) {
        this.wanted = false;
        return;
      }
    } else {
      this.tokenRefusals = 0;
    }
    this.later(code === 4401 ? 0 : undefined);
  }

  /** Reconnects after a full-jitter wait (or `ms`). */
  private later(ms?: number): void {
    const ceiling = Math.min(this.capMs, this.baseMs * 2 ** this.attempt);
    this.attempt++;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.open(), ms ?? Math.random() * ceiling);
  }

  override connect(): void {
    this.wanted = true;
    void this.open();
  }

  override disconnect(): void {
    this.wanted = false;
    clearTimeout(this.timer);
    super.disconnect();
  }

  override destroy(): void {
    this.wanted = false;
    clearTimeout(this.timer);
    super.destroy();
  }
}
