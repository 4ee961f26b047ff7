//! A scratch app made the way a user makes one: `npm pack` the client, copy
//! examples/embed/ into a fresh directory, `npm install` the tarball into it
//! (offline: the package has no dependencies), bundle app.jsx with esbuild
//! (react and react-dom from the repo's node_modules through `nodePaths`,
//! so no network), and run its server.mjs.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";

import { ROOT } from "./runtime.js";

export class ScratchApp {
  readonly log: string[] = [];
  private server: ChildProcess | null = null;

  private constructor(
    /** The temp dir: the tarball and the app. */
    readonly tmp: string,
    readonly dir: string,
    readonly tarball: string,
    /** Files esbuild bundled, relative to the app. */
    readonly bundled: string[],
  ) {}

  /** Packs the client, installs it into a copy of examples/embed and bundles the app. */
  static async make(): Promise<ScratchApp> {
    const tmp = mkdtempSync(join(tmpdir(), "homeroom-scratch-"));
    const npm = (args: string[], cwd: string): string =>
      execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, npm_config_update_notifier: "false" } });
    const [packed] = JSON.parse(npm(["pack", join(ROOT, "client"), "--pack-destination", tmp, "--json", "--ignore-scripts"], ROOT)) as Array<{ filename: string }>;
    const tarball = join(tmp, packed!.filename);
    const dir = join(tmp, "app");
    const example = join(ROOT, "examples/embed");
    // The example's own files; its package.json names registry versions, so
    // the scratch app gets a bare one and only the tarball is installed.
    cpSync(example, dir, { recursive: true, filter: (src) => !/node_modules|package(-lock)?\.json$|app\.js(\.map)?$/.test(relative(example, src)) });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "homeroom-scratch", private: true, type: "module" }, null, 2));
    npm(["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball], dir);
    const result = await build({
      absWorkingDir: dir,
      entryPoints: ["app.jsx"],
      bundle: true,
      format: "esm",
      target: "es2020",
      jsx: "automatic",
      // React's development build: <StrictMode> then mounts every effect twice.
      define: { "process.env.NODE_ENV": '"development"' },
      nodePaths: [join(ROOT, "node_modules")],
      outfile: join(dir, "app.js"),
      sourcemap: true,
      metafile: true,
      logLevel: "silent",
    });
    return new ScratchApp(tmp, dir, tarball, Object.keys(result.metafile.inputs));
  }

  /** Files in the installed package (what `npm install` of the tarball put there). */
  installed(): string[] {
    return readdirSync(join(this.dir, "node_modules/homeroom/dist"));
  }

  /** Runs server.mjs on `port`; resolves once it listens. */
  async serve(port: number, env: Record<string, string>): Promise<string> {
    const child = spawn(process.execPath, ["server.mjs"], {
      cwd: this.dir,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", ...env },
    });
    this.server = child;
    const origin = `http://127.0.0.1:${port}`;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server.mjs did not start:\n${this.log.join("\n")}`)), 15_000);
      const take = (chunk: Buffer): void => {
        for (const line of chunk.toString("utf8").split(/\r?\n/)) if (line.trim()) this.log.push(line);
        if (this.log.some((l) => l.includes(`on ${origin}/`))) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout?.on("data", take);
      child.stderr?.on("data", take);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`server.mjs exited (${code}):\n${this.log.join("\n")}`));
      });
    });
    return origin;
  }

  /** Imports an entry point of the installed package (`./token`), found through its package.json `exports`. */
  async import<T>(entry: string): Promise<T> {
    const pkgDir = join(this.dir, "node_modules/homeroom");
    const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as { exports: Record<string, { import: string }> };
    const target = pkg.exports[entry];
    if (!target) throw new Error(`homeroom has no entry point ${entry}`);
    return (await import(pathToFileURL(join(pkgDir, target.import)).href)) as T;
  }

  async stop(): Promise<void> {
    const child = this.server;
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
