//! The runtime under test: one `wrangler dev` (workerd) on free ports with
//! persistence in a temp dir, in its own process group; readiness polling,
//! a captured log, and a stop that kills the whole group.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file runs from client/.build/e2e/). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** Ports this process handed out: never given twice (two runtimes starting at once). */
const handedOut = new Set<number>();

/** The kernel's ephemeral range, first and last port (Linux's default when unreadable). */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (low !== undefined && high !== undefined && Number.isInteger(low) && Number.isInteger(high) && low > 0 && high >= low) {
      return [low, high];
    }
  } catch {
    // not Linux, or not readable
  }
  return [32768, 60999];
}

/** Whether nobody listens on `port` (we can bind it, then let it go). */
function bindable(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once("error", () => res(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => res(true)));
  });
}

/**
 * A free TCP port on 127.0.0.1, outside the kernel's ephemeral range (below
 * it, as a rule), never one handed out before. Outside the range because a
 * port the kernel picks for us comes from the range it also gives the local
 * end of every outgoing connection (and workerd's own ports): one could take
 * it before wrangler binds it. Callers still start again if wrangler says the
 * address is in use.
 */
export async function freePort(): Promise<number> {
  const [low, high] = ephemeralRange();
  // Below the range, then above it; each only with room for 100 ports.
  const ranges: Array<[number, number]> = [[20000, low], [high + 1, 65535]];
  for (const [from, to] of ranges) {
    const span = to - from;
    if (span < 100) continue;
    const start = Math.floor(Math.random() * span);
    for (let i = 0; i < span; i++) {
      const port = from + ((start + i) % span);
      if (!handedOut.has(port) && (await bindable(port))) {
        handedOut.add(port);
        return port;
      }
    }
  }
  for (;;) {
    const port = await new Promise<number>((res, rej) => {
      const srv = createServer();
      srv.once("error", rej);
      srv.listen(0, "127.0.0.1", () => {
        const addr = srv.address();
        const port = typeof addr === "object" && addr ? addr.port : 0;
        srv.close(() => res(port));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** Whether wrangler's output says a port it was given was taken meanwhile. */
export function addressInUse(output: string): boolean {
  return output.includes("Address already in use") || output.includes("EADDRINUSE");
}

export class Wrangler {
  readonly log: string[] = [];
  private exited = false;

  private constructor(
    readonly port: number,
    private readonly child: ChildProcess,
    private readonly persist: string,
  ) {
    const take = (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split(/\r?\n/)) if (line.trim()) this.log.push(line);
    };
    child.stdout?.on("data", take);
    child.stderr?.on("data", take);
    child.once("exit", () => (this.exited = true));
  }

  /** Where its storage is: give it to {@link Wrangler.start} to restart on the same storage. */
  get persistDir(): string {
    return this.persist;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Starts `wrangler dev` and waits until it serves the demo page; on fresh
   * ports again (a few times) if another process took one of its ports. Its storage is
   * `persist` if given (a runtime {@link Wrangler.kill}ed before), else a new directory.
   */
  static async start(extraArgs: string[] = [], persist?: string): Promise<Wrangler> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Wrangler.startOnce(extraArgs, persist);
      } catch (e) {
        if (attempt >= 3 || !addressInUse(String(e))) throw e;
      }
    }
  }

  private static async startOnce(extraArgs: string[], given?: string): Promise<Wrangler> {
    const [port, inspector] = [await freePort(), await freePort()];
    const persist = given ?? mkdtempSync(join(tmpdir(), "homeroom-browser-e2e-"));
    // The Wasm as built (by scripts/test, or here), served as built: with wrangler.toml's [build], wrangler
    // builds again once its file watcher is ready and reloads the Worker, which on a busy
    // machine can be in the middle of a test (scripts/prebuilt-config says more).
    if (!process.env.HOMEROOM_PREBUILT) {
      execFileSync("bash", ["-c", ". scripts/env >/dev/null && scripts/build-worker"], { cwd: ROOT, stdio: "ignore" });
    }
    const config = execFileSync(join(ROOT, "scripts/prebuilt-config"), { cwd: ROOT }).toString().trim();
    const args = [
      "dev", "--config", config,
      "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector),
      "--persist-to", persist, "--show-interactive-dev-session=false",
      // No AUTH_SECRET here: the Worker refuses rooms unless told this is local dev.
      "--var", "ANONYMOUS_DEV:true", ...extraArgs,
    ];
    const quoted = args.map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
    const child = spawn("bash", ["-c", `source scripts/env && exec node_modules/.bin/wrangler ${quoted}`], {
      cwd: ROOT,
      detached: true, // its own process group: stop() kills wrangler and workerd together
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", FORCE_COLOR: "0" },
    });
    const w = new Wrangler(port, child, persist);
    const deadline = Date.now() + Number(process.env.E2E_START_TIMEOUT_SECS ?? 180) * 1000;
    for (;;) {
      if (w.exited) {
        await w.stop(); // removes the persistence dir
        throw new Error(`wrangler dev exited early:\n${w.tail(60)}`);
      }
      if (addressInUse(w.tail(60))) {
        await w.stop();
        throw new Error(`wrangler dev could not bind its ports:\n${w.tail(60)}`);
      }
      try {
        const res = await fetch(`${w.origin}/`, { signal: AbortSignal.timeout(2_000) });
        if (res.ok && (await res.text()).includes("homeroom")) return w;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await w.stop();
        throw new Error(`wrangler dev did not serve / in time:\n${w.tail(60)}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  tail(n: number): string {
    return this.log.slice(-n).join("\n");
  }

  /** Kills wrangler and workerd at once (SIGKILL), as a crash would; the storage stays. */
  async kill(): Promise<void> {
    const pid = this.child.pid;
    if (pid !== undefined && !this.exited) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
      const deadline = Date.now() + 5_000;
      while (!this.exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(): Promise<void> {
    const pid = this.child.pid;
    if (pid !== undefined && !this.exited) {
      try {
        process.kill(-pid, "SIGTERM");
      } catch {
        // already gone
      }
      const deadline = Date.now() + 5_000;
      while (!this.exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      if (!this.exited) {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    rmSync(this.persist, { recursive: true, force: true });
  }
}

/**
 * What `wrangler dev`'s own proxy answers (503) when its pooled connection to
 * the runtime behind it dies under a request that is not a GET or HEAD (those
 * it sends again itself): kj closes an idle keep-alive connection after 5 s on
 * both sides, and a request written as the runtime closes it is lost before
 * the Worker reads it (cloudflare/workers-sdk#14641). Our Worker never says it.
 */
const DEV_PROXY_LOST = "Your worker restarted mid-request.";

/**
 * `fetch`, sending a request again (up to 3 times) that `wrangler dev`'s proxy
 * lost on its way to the runtime, as the proxy itself does for a GET. Any other
 * answer, 503s included, is returned as is.
 */
export async function devFetch(url: string, init: RequestInit): Promise<Response> {
  for (let tries = 1; ; tries++) {
    const res = await fetch(url, init);
    if (res.status !== 503 || tries === 3) return res;
    const body = await res.clone().text();
    if (!body.startsWith(DEV_PROXY_LOST)) return res;
    console.error(`wrangler dev's proxy lost ${init.method ?? "GET"} ${url} (try ${tries}); sending it again`);
  }
}
