//! From zero to a room in your own app, in headless Chromium: the packed
//! client installed into a scratch copy of examples/embed (React hooks, a
//! token endpoint minting with homeroom/token), against its own `wrangler
//! dev` with an AUTH_SECRET. Two tabs see each other and a state key; a
//! drained socket comes back and resumes; an expired token is refused
//! (4401 token_expired) and replaced through getToken; 1,000 presence and
//! signal calls a second for 10 s get no `rate_limited` and no 4029 and the
//! other tab ends with the last ones; the member list over HTTP from the
//! app's origin (CORS). Screenshots go to screenshots/.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";

import { launch, screenshot, withLogs } from "./browser.js";
import { devFetch, freePort, Wrangler } from "./runtime.js";
import { ScratchApp } from "./scratch.js";

type MintToken = (o: Record<string, unknown>) => Promise<string>;

const SECRET = "embed-e2e-auth-secret-2f9c41d07b6e5a83"; // 38 bytes
const ADMIN_KEY = "embed-e2e-admin-key-8e1d3c5b7a9f0246";
const ROOM = "embed-" + Date.now().toString(36);

let wr: Wrangler;
let app: ScratchApp;
let appOrigin: string;
let browser: Browser;
let mintToken: MintToken;
const logs: string[] = [];
const contexts: BrowserContext[] = [];

/** Runs a test body; on failure, adds the pages', the app server's and the runtime's logs. */
const logged = withLogs(() => [
  ["page logs", logs.slice(-40).join("\n")],
  ["app server", app?.log.slice(-20).join("\n") ?? ""],
  ["wrangler dev (last 60 lines)", wr?.tail(60) ?? ""],
]);

interface Tab {
  page: Page;
  /** Room sockets the page opened (StrictMode must not make a second one). */
  sockets: string[];
  /** /token requests the page made. */
  tokenCalls: number;
}

/** A tab of the app as `user`; `route` may answer its requests first. */
async function tab(user: string, label: string, route?: (p: Page) => Promise<void>): Promise<Tab> {
  // No MF-CF-Blob header here (browser.ts's `context` adds one): a real
  // page sends none, and the cross-origin presence call's preflight would
  // have to allow it.
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(ctx);
  const page = await ctx.newPage();
  const t: Tab = { page, sockets: [], tokenCalls: 0 };
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") logs.push(`[${label} console.${m.type()}] ${m.text()}`);
  });
  page.on("pageerror", (e) => logs.push(`[${label} pageerror] ${e.message}`));
  page.on("websocket", (ws) => {
    if (ws.url().includes(`/rooms/${ROOM}/ws`)) t.sockets.push(ws.url());
  });
  page.on("request", (r) => {
    if (new URL(r.url()).pathname === "/token") t.tokenCalls += 1;
  });
  if (route) await route(page);
  await page.goto(`${appOrigin}/?${new URLSearchParams({ user, room: ROOM })}`);
  return t;
}

const waitOpen = (p: Page, timeout = 30_000) => p.waitForSelector("#status[data-state=open]", { timeout });
const text = async (p: Page, sel: string) => (await p.locator(sel).textContent())?.trim() ?? "";

/** Waits until `sel`'s text includes `want`. */
async function waitText(p: Page, sel: string, want: string, timeout = 15_000): Promise<void> {
  await p.waitForFunction(([s, w]) => (document.querySelector(s!)?.textContent ?? "").includes(w!), [sel, want] as const, { timeout, polling: 50 });
}

before(async () => {
  app = await ScratchApp.make();
  const appPort = await freePort();
  appOrigin = `http://127.0.0.1:${appPort}`;
  wr = await Wrangler.start([
    "--var", `AUTH_SECRET:${SECRET}`,
    "--var", `ADMIN_KEY:${ADMIN_KEY}`,
    "--var", `CORS_ORIGINS:${appOrigin}`,
  ]);
  await app.serve(appPort, { AUTH_SECRET: SECRET, HOMEROOM_URL: wr.origin, TOKEN_TTL: "600" });
  ({ mintToken } = await app.import<{ mintToken: MintToken }>("./token"));
  browser = await launch();
});

after(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close().catch(() => {});
  await app?.stop();
  await wr?.stop();
});

describe("a room in your own app (examples/embed, the packed client)", { timeout: 300_000 }, () => {
  let a: Tab; // alice
  let b: Tab; // bob

  it("is built from the tarball: its dist installed, bundled from node_modules/homeroom", logged(async () => {
    for (const f of ["homeroom.js", "homeroom.d.ts", "react.js", "react.d.ts", "token.js", "token.d.ts", "tuning.js", "tuning.d.ts"]) {
      assert.ok(app.installed().includes(f), `${f} installed`);
    }
    assert.ok(app.bundled.includes("node_modules/homeroom/dist/react.js"), "the app bundles the installed package's homeroom/react");
    assert.ok(app.bundled.some((f) => f.endsWith("react/index.js") || f.includes("react/cjs/react.development.js")), "and react");
  }));

  it("two tabs: each sees both members, and a state key set in one shows in the other", logged(async () => {
    [a, b] = [await tab("alice", "alice"), await tab("bob", "bob")];
    await Promise.all([waitOpen(a.page), waitOpen(b.page)]);
    for (const t of [a, b]) {
      await t.page.waitForSelector('#people li[data-name="alice"]', { timeout: 15_000 });
      await t.page.waitForSelector('#people li[data-name="bob"]', { timeout: 15_000 });
      assert.equal(await text(t.page, "#count"), "2");
      assert.equal(t.sockets.length, 1, "StrictMode mounted twice; one socket");
      assert.equal(t.tokenCalls, 1);
    }
    await a.page.fill("#topic-input", "lunch at noon");
    await a.page.click("#topic-set");
    await waitText(b.page, "#topic", "lunch at noon");
    const version = Number(await b.page.locator("#topic").getAttribute("data-version"));
    assert.ok(version > 0, `version ${version}`);
    assert.equal(await a.page.locator("#topic").getAttribute("data-version"), String(version));
    await screenshot(b.page, "embed-two-tabs");
  }));

  it("accepts the tokens the shipped mintToken() makes, and only those (HTTP presence with each)", logged(async () => {
    const res = await fetch(`${appOrigin}/token?user=alice&room=${ROOM}`);
    const { token } = (await res.json()) as { token: string };
    assert.equal(token.split(".").length, 3, "a JWT");
    const ok = await fetch(`${wr.origin}/rooms/${ROOM}/presence`, { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(ok.status, 200, await ok.clone().text());
    const forged = await mintToken({ secret: SECRET.replace("2f9c", "0000"), room: ROOM, kind: "rooms", sub: "mallory" });
    const refused = await fetch(`${wr.origin}/rooms/${ROOM}/presence`, { headers: { Authorization: `Bearer ${forged}` } });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { error: string }).error, "token_bad_signature");
  }));

  it("reconnects and resumes after the server drops the socket (drain: 1001)", logged(async () => {
    const res = await devFetch(`${wr.origin}/rooms/${ROOM}/drain`, { method: "POST", headers: { Authorization: `Bearer ${ADMIN_KEY}` } });
    assert.equal(res.status, 200, await res.text());
    for (const t of [a, b]) {
      await waitText(t.page, "#closes", "1001");
      await waitOpen(t.page);
      await waitText(t.page, "#resumed", "resumed");
      assert.equal(t.sockets.length, 2, "one new socket");
    }
    // Live again: a chat line from bob reaches alice.
    await b.page.fill("#chat-input", "back again");
    await b.page.press("#chat-input", "Enter");
    await waitText(a.page, "#chat", "back again");
  }));

  it("1,000 setPresence and signal calls a second for 10 s: no rate_limited, no 4029, the other tab ends with the last ones", logged(async () => {
    const during = ["one", "two", "three"].map((w) => `during the storm ${w}`);
    // The app sets presence and sends a signal on every pointer move; the
    // page moves the pointer 1,000 times a second (catching up in bulk when
    // the timer is late), x = 0 … 9,999.
    const storm = a.page.evaluate(async () => {
      const pad = document.getElementById("pad")!;
      const start = performance.now();
      let i = 0;
      await new Promise<void>((resolve) => {
        const tick = (): void => {
          const due = Math.min(10_000, Math.floor(performance.now() - start));
          for (; i < due; i++) pad.dispatchEvent(new PointerEvent("pointermove", { clientX: i, clientY: 7, bubbles: true }));
          if (i < 10_000) setTimeout(tick, 4);
          else resolve();
        };
        tick();
      });
      return { moves: i, ms: performance.now() - start };
    });
    // Durable sends in the middle of it go out too.
    for (const line of during) {
      await new Promise((r) => setTimeout(r, 2_000));
      await a.page.fill("#chat-input", line);
      await a.page.press("#chat-input", "Enter");
    }
    const { moves, ms } = await storm;
    assert.equal(moves, 10_000);
    assert.ok(ms < 14_000, `the storm took ${Math.round(ms)} ms`);
    // The other tab ends with the last position, by signal and by presence.
    await b.page.waitForSelector('#their-cursor[data-x="9999"]', { timeout: 10_000 });
    await b.page.waitForSelector('#people li[data-name="alice"][data-x="9999"]', { timeout: 10_000 });
    for (const line of during) await waitText(b.page, "#chat", line);
    for (const t of [a, b]) {
      assert.equal(await text(t.page, "#errors"), "none", "no error frame (rate_limited) reached the page");
      assert.doesNotMatch(await text(t.page, "#closes"), /4029/);
      assert.equal(await t.page.locator("#status").getAttribute("data-state"), "open");
      assert.equal(t.sockets.length, 2, "no reconnect since the drain");
    }
    await screenshot(b.page, "embed-after-storm");
  }));

  it("an expired token is refused visibly (4401 token_expired), then replaced through getToken", logged(async () => {
    let served = 0;
    const c = await tab("carol", "carol", async (p) => {
      await p.route("**/token?*", async (route) => {
        served += 1;
        if (served > 1) return route.continue();
        // The first token the endpoint hands out expired a minute ago.
        const expired = await mintToken({ secret: SECRET, room: ROOM, kind: "rooms", sub: "carol", exp: Math.floor(Date.now() / 1000) - 60 });
        await route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ token: expired }) });
      });
    });
    await waitText(c.page, "#closes", "4401 token_expired");
    await waitOpen(c.page);
    assert.equal(served, 2, "one refused token, one good one");
    assert.equal(c.sockets.length, 2);
    await a.page.waitForSelector('#people li[data-name="carol"]', { timeout: 15_000 });
    await screenshot(c.page, "embed-token-refused-then-open");
  }));

  it("loads the member list over HTTP from the app's origin (CORS_ORIGINS)", logged(async () => {
    const preflight = await devFetch(`${wr.origin}/rooms/${ROOM}/presence`, {
      method: "OPTIONS",
      headers: { Origin: appOrigin, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization" },
    });
    assert.equal(preflight.status, 204, "the Worker answers the preflight (needs CORS_ORIGINS support)");
    assert.equal(preflight.headers.get("access-control-allow-origin"), appOrigin);
    await a.page.click("#http-presence-load");
    await waitText(a.page, "#http-presence", "members");
    const n = Number((await text(a.page, "#http-presence")).split(" ")[0]);
    assert.ok(n >= 3, `${n} members over HTTP`);
    const other = await devFetch(`${wr.origin}/rooms/${ROOM}/presence`, { method: "OPTIONS", headers: { Origin: "http://evil.example", "Access-Control-Request-Method": "GET" } });
    assert.equal(other.headers.get("access-control-allow-origin"), null, "another origin is not allowed");
  }));
});
