//! Which endpoint to connect to when a deployment has several: probe each
//! one's `/probe` at once and take the first that opens, remember the choice
//! for a day, and go back to the same endpoint within a minute of a drop.

import { detachSocket, type Env, type SocketLike } from "./env.js";

export const PIN_KEY = "homeroom.endpoint";

export interface RegionOptions {
  /** A probe that has not opened by then counts as failed, ms. */
  probeTimeoutMs: number;
  /** How long a probed choice is kept (localStorage), ms. */
  pinTtlMs: number;
  /** Within this long after a disconnect, reconnect to the same endpoint, ms. */
  stickyMs: number;
}

export const DEFAULT_REGIONS: RegionOptions = {
  probeTimeoutMs: 2500,
  pinTtlMs: 24 * 60 * 60 * 1000,
  stickyMs: 60_000,
};

/** `https://h/x/` → `wss://h/x`: the WebSocket base of an endpoint. */
export function wsBase(url: string): string {
  const trimmed = url.replace(/\/+$/, "");
  if (/^wss?:\/\//i.test(trimmed)) return trimmed;
  if (/^https:\/\//i.test(trimmed)) return "wss://" + trimmed.slice(8);
  if (/^http:\/\//i.test(trimmed)) return "ws://" + trimmed.slice(7);
  throw new TypeError(`homeroom: endpoint must be an http(s) or ws(s) URL: ${url}`);
}

export const probeUrl = (endpoint: string): string => wsBase(endpoint) + "/probe";

interface Pin {
  url: string;
  chosenAt: number;
}

/** How the last choice was made (for status displays and tests). */
export type ChoiceWhy = "only" | "sticky" | "pinned" | "probed" | "fallback";

export class EndpointChooser {
  /** The endpoint of the current or last connection. */
  current: string | null = null;
  /** When the present outage began (null while connected or never connected). */
  private downSince: number | null = null;
  lastWhy: ChoiceWhy | null = null;

  constructor(
    private readonly env: Env,
    readonly endpoints: readonly string[],
    private readonly o: RegionOptions = DEFAULT_REGIONS,
  ) {
    if (endpoints.length === 0) throw new TypeError("homeroom: no endpoints");
  }

  /** A connection on `current` got its welcome. */
  connected(): void {
    this.downSince = null;
  }

  /** The connection dropped (the first drop of an outage starts the 60 s window). */
  disconnected(): void {
    if (this.current !== null && this.downSince === null) this.downSince = this.env.now();
  }

  /**
   * The endpoint for the next connect: synchronous unless it has to probe
   * (so a reconnect costs no extra turn of the event loop).
   */
  choose(): string | Promise<string> {
    const pick = (url: string, why: ChoiceWhy): string => {
      this.current = url;
      this.lastWhy = why;
      return url;
    };
    if (this.endpoints.length === 1) return pick(this.endpoints[0]!, "only");
    const now = this.env.now();
    if (this.current !== null && this.downSince !== null) {
      // A brief drop: go back where the session was, so resume stays local.
      if (now - this.downSince <= this.o.stickyMs) return pick(this.current, "sticky");
      // A long outage: the endpoint we were on may be the one that is down.
      const pin = this.readPin();
      if (pin && pin.url === this.current) this.forgetPin();
    }
    const pin = this.readPin();
    if (pin) return pick(pin.url, "pinned");
    return this.probe().then((winner) => {
      if (winner === null) return pick(this.endpoints[0]!, "fallback");
      this.writePin({ url: winner, chosenAt: this.env.now() });
      return pick(winner, "probed");
    });
  }

  /**
   * Opens `/probe` on every endpoint at once; resolves with the first that
   * opens, or null when all fail or none opens within the timeout.
   */
  probe(): Promise<string | null> {
    const { env } = this;
    return new Promise((resolve) => {
      const sockets: SocketLike[] = [];
      let failures = 0;
      let done = false;
      const finish = (winner: string | null): void => {
        if (done) return;
        done = true;
        env.clearTimeout(timer);
        for (const s of sockets) {
          detachSocket(s);
          try {
            s.close(1000);
          } catch {
            // already closing
          }
        }
        resolve(winner);
      };
      const timer = env.setTimeout(() => finish(null), this.o.probeTimeoutMs);
      for (const url of this.endpoints) {
        let failed = false;
        const fail = (): void => {
          if (failed) return;
          failed = true;
          failures += 1;
          if (failures === this.endpoints.length) finish(null);
        };
        let s: SocketLike;
        try {
          s = new env.WebSocket(probeUrl(url));
        } catch {
          fail();
          continue;
        }
        sockets.push(s);
        s.onopen = () => finish(url);
        s.onerror = fail;
        s.onclose = fail;
      }
    });
  }

  private readPin(): Pin | null {
    try {
      const raw = this.env.localStorage?.getItem(PIN_KEY);
      if (!raw) return null;
      const pin = JSON.parse(raw) as Partial<Pin>;
      if (typeof pin.url !== "string" || typeof pin.chosenAt !== "number") return null;
      if (!this.endpoints.includes(pin.url)) return null;
      const age = this.env.now() - pin.chosenAt;
      return age >= 0 && age < this.o.pinTtlMs ? (pin as Pin) : null;
    } catch {
      return null;
    }
  }

  private writePin(pin: Pin): void {
    try {
      this.env.localStorage?.setItem(PIN_KEY, JSON.stringify(pin));
    } catch {
      // not remembered: the next load probes again
    }
  }

  private forgetPin(): void {
    try {
      this.env.localStorage?.removeItem(PIN_KEY);
    } catch {
      // nothing to forget
    }
  }
}
