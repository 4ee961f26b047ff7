//! Headless Chromium (Debian's /usr/bin/chromium) driven by playwright-core,
//! with the flags that keep it off the network it cannot reach here.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

import { ROOT } from "./runtime.js";

export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
export const SCREENSHOTS = join(ROOT, "screenshots");

export function launch(): Promise<Browser> {
  // Playwright gives each launch a fresh temporary user-data-dir.
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** `request.cf` for every request of the context (wrangler dev honours MF-CF-Blob). */
export const FROM = {
  sydney: { colo: "SYD", continent: "OC", country: "AU" },
  frankfurt: { colo: "FRA", continent: "EU", country: "DE" },
  virginia: { colo: "IAD", continent: "NA", country: "US" },
};

export async function context(browser: Browser, from: object): Promise<BrowserContext> {
  return browser.newContext({
    viewport: { width: 1280, height: 800 },
    extraHTTPHeaders: { "MF-CF-Blob": JSON.stringify(from) },
  });
}

/** A page that records console errors and page errors (shown when a test fails). */
export async function page(ctx: BrowserContext, url: string, log: string[], label: string): Promise<Page> {
  const p = await ctx.newPage();
  p.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") log.push(`[${label} console.${m.type()}] ${m.text()}`);
  });
  p.on("pageerror", (e) => log.push(`[${label} pageerror] ${e.message}`));
  await p.goto(url);
  return p;
}

export async function screenshot(p: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await p.screenshot({ path });
  return path;
}

/**
 * Wraps a test body so that a failure carries the logs that explain it:
 * `sections()` names each log (pages, app server, runtime) with its last lines,
 * read only when the body throws.
 */
export function withLogs(
  sections: () => Array<[string, string]>,
): (fn: (t: TestContext) => Promise<void>) => (t: TestContext) => Promise<void> {
  return (fn) => async (t) => {
    try {
      await fn(t);
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      err.message += sections()
        .map(([name, text]) => `\n--- ${name} ---\n${text}`)
        .join("");
      throw err;
    }
  };
}
