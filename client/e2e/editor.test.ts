//! Documents in headless Chromium against a real `wrangler dev`, with the stock `y-websocket`
//! provider as npm ships it, bundled for the page. First the demo's editor (examples/editor,
//! /editor.html): two tabs type at once and converge, see each other in awareness, a late tab
//! and a reload get the whole document. Then the scenarios the Node trials play
//! (tests/docs/scenarios.mjs, tests/e2e/docs.rs checks the same), run in pages: an offline
//! edit merges, a read-only member's update is refused and changes nothing, a backend's edit
//! reaches every editor, our provider takes the endpoint that answers, the notes kind's rules
//! refuse, edit and lock, a tab whose renderer crashes loses its awareness for the others, and
//! after the runtime is killed and restarted on the same storage a fresh page reads every
//! saved edit.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildSync } from "esbuild";
import type { Browser, BrowserContext, Page } from "playwright-core";

import { mintToken } from "../src/token.js";
import { context, FROM, launch, withLogs, page, screenshot } from "./browser.js";
import { ROOT, Wrangler } from "./runtime.js";

let wr: Wrangler;
let browser: Browser;
const logs: string[] = [];
const contexts: BrowserContext[] = [];
const SECRET = "browser-e2e-doc-secret-0c4f8a2b9d1e7f35";
const ADMIN_KEY = "browser-e2e-doc-admin-key-6b2e9c1d4a7f";
const stamp = Date.now().toString(36);

const logged = withLogs(() => [
  ["page logs", logs.slice(-40).join("\n")],
  ["wrangler dev (last 60 lines)", wr?.tail(60) ?? ""],
]);

const token = (room: string, sub: string, info?: Record<string, unknown>, kind = "docs") =>
  mintToken({ secret: SECRET, room, kind, sub, ...(info ? { info } : {}) });

async function newContext(): Promise<BrowserContext> {
  const ctx = await context(browser, FROM.virginia);
  contexts.push(ctx);
  return ctx;
}

async function open(doc: string, user: string): Promise<Page> {
  const url = `${wr.origin}/editor.html?doc=${doc}&user=${user}&token=${await token(doc, user)}`;
  const p = await page(await newContext(), url, logs, user);
  await p.waitForSelector("#status[data-synced=true]", { timeout: 30_000 });
  return p;
}

const value = (p: Page) => p.locator("#text").inputValue();
const who = (p: Page) => p.$$eval("#who li", (els) => els.map((e) => e.textContent ?? "").sort());

async function until(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** tests/docs/scenarios.mjs with yjs and y-websocket, as one script for a page. */
const bundle = buildSync({
  entryPoints: [join(ROOT, "tests/docs/browser.mjs")],
  bundle: true,
  write: false,
  format: "iife",
  target: "es2020",
  logLevel: "warning",
}).outputFiles[0]!.text;

type Args = Record<string, unknown>;

/** A page of the runtime's origin (no script of its own) that can play the scenarios. */
async function player(label: string, ctx?: BrowserContext): Promise<Page> {
  const p = await page(ctx ?? (await newContext()), `${wr.origin}/no-page-here`, logs, label);
  await p.addScriptTag({ content: bundle });
  return p;
}

/** Plays scenario `name` in page `p` (one set of editors per page, kept between calls). */
function play(p: Page, name: string, args: Args): Promise<any> {
  return p.evaluate(([n, a]) => {
    const g = globalThis as any;
    g.play ??= g.docScenarios(a);
    return g.play[n]();
  }, [name, args] as const);
}

async function argsFor(room: string, kind = "docs"): Promise<Args> {
  const tokens: Record<string, string> = {};
  for (const u of ["ann", "bob", "cat"]) tokens[u] = await token(room, u, undefined, kind);
  tokens.reader = await token(room, "reader", { read_only: true }, kind);
  const now = Math.floor(Date.now() / 1000);
  tokens.expired = await mintToken({ secret: SECRET, room, kind, sub: "ann", exp: now - 60, iat: now - 120 });
  return { url: `ws://127.0.0.1:${wr.port}/${kind}`, room, tokens, admin: ADMIN_KEY };
}

const VARS = ["--var", `AUTH_SECRET:${SECRET}`, "--var", `ADMIN_KEY:${ADMIN_KEY}`];

before(async () => {
  wr = await Wrangler.start(VARS);
  browser = await launch();
});

after(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close().catch(() => {});
  await wr?.stop();
});

describe("documents in Chromium", { timeout: 240_000 }, () => {
  it("the editor: two tabs type at once and converge, see each other, and a late tab and a reload get it all", logged(async () => {
    const doc = `e2e-doc-${stamp}`;
    const ann = await open(doc, "ann");
    const bob = await open(doc, "bob");
    await until("each sees the other", async () => {
      const [a, b] = [await who(ann), await who(bob)];
      return a.includes("bob") && b.includes("ann");
    });
    // Typed at the same moment, each at the end of its own view.
    await Promise.all([
      ann.locator("#text").pressSequentially("ann was here. ", { delay: 10 }),
      bob.locator("#text").pressSequentially("bob too. ", { delay: 10 }),
    ]);
    await until("the two tabs converge", async () => {
      const [a, b] = [await value(ann), await value(bob)];
      return a === b && a.length === "ann was here. bob too. ".length;
    });
    const text = await value(ann);
    // Each tab's caret moved with the other's typing: each one's words are whole, in order.
    assert.ok(text.includes("ann was here. ") && text.includes("bob too. "), text);

    const cat = await open(doc, "cat");
    await until("a late tab gets the whole document", async () => (await value(cat)) === text);
    await until("and is seen", async () => (await who(ann)).includes("cat"));

    await bob.reload();
    await bob.waitForSelector("#status[data-synced=true]", { timeout: 30_000 });
    await until("a reloaded tab gets it again", async () => (await value(bob)) === text);
    await until("and the old tab of bob is gone from awareness", async () =>
      (await who(ann)).filter((n) => n === "bob").length === 1);
    await screenshot(ann, "editor");
  }));

  it("an offline edit merges on reconnect", logged(async () => {
    const r = await play(await player("offline"), "offline", await argsFor(`e2e-off-${stamp}`));
    assert.equal(r.apart, true, JSON.stringify(r));
    assert.ok(r.ann.includes("offline-bob ") && r.ann.includes("online-ann "), JSON.stringify(r));
    assert.equal(r.bob, r.ann);
  }));

  it("a read-only member's update is refused and changes nothing", logged(async () => {
    const r = await play(await player("readonly"), "readonly", await argsFor(`e2e-ro-${stamp}`));
    assert.equal(r.writer, "kept ", JSON.stringify(r));
    assert.equal(r.fresh, "kept ", JSON.stringify(r));
    assert.ok(r.refused.length > 0 && r.refused.every((x: { code: string }) => x.code === "read_only"), JSON.stringify(r));
  }));

  it("a backend's edit reaches every editor", logged(async () => {
    const r = await play(await player("server"), "serveredit", await argsFor(`e2e-srv-${stamp}`));
    assert.equal(r.status, 200, JSON.stringify(r));
    assert.equal(r.ann, "by hand. by the assistant.");
    assert.equal(r.bob, r.ann);
    assert.equal(r.json.text, r.ann);
  }));

  it("a restored version holds against an editor with the newer state", logged(async () => {
    const r = await play(await player("versions"), "versions", await argsFor(`e2e-ver-${stamp}`));
    assert.equal(r.saved, 200, JSON.stringify(r));
    assert.equal(r.restored, 200, JSON.stringify(r));
    assert.equal(r.ann, "the first draft");
    assert.equal(r.bob, "the first draft");
    assert.deepEqual(r.versions, ["v1"]);
    assert.equal(r.kept, "the first draft");
  }));

  it("our provider (homeroom/yjs) takes a new token after a refused one and says saved only when stored", logged(async () => {
    const r = await play(await player("provider"), "provider", await argsFor(`e2e-prov-${stamp}`));
    assert.ok(r.calls >= 2, JSON.stringify(r));
    assert.equal(r.savingAtOnce, true, JSON.stringify(r));
    assert.equal(r.saved, true, JSON.stringify(r));
    assert.ok(r.events.includes(false) && r.events.includes(true), JSON.stringify(r));
    assert.ok(r.refusals.length > 0 && r.refusals.every((x: { code: string }) => x.code === "read_only"), JSON.stringify(r));
    assert.equal(r.reader, false, JSON.stringify(r));
  }));

  it("our provider probes the endpoints and takes the one that answers", logged(async () => {
    const r = await play(await player("regions"), "regions", await argsFor(`e2e-reg-${stamp}`));
    assert.equal(r.serverUrl, `ws://127.0.0.1:${wr.port}/docs`, JSON.stringify(r));
    assert.equal(r.saved, true, JSON.stringify(r));
    assert.equal(r.text, "through the endpoint that answered");
  }));

  it("the notes kind's rules refuse a long title, edit as the room and lock the note", logged(async () => {
    const r = await play(await player("rules"), "rules", await argsFor(`e2e-rules-${stamp}`, "notes"));
    assert.equal(r.bobTitle, "Minutes", JSON.stringify(r));
    assert.deepEqual(r.refused.map((x: { code: string }) => x.code), ["title_too_long"]);
    assert.equal(r.appended, 200);
    assert.equal(r.locked, 200);
    assert.deepEqual(r.json, { title: "Minutes", body: "Written by the room.", meta: { locked: true } });
    assert.deepEqual(r.outline, { title: "Minutes", body_chars: 20, locked: true });
  }));

  it("a tab whose renderer crashes loses its awareness for the others", logged(async () => {
    const args = await argsFor(`e2e-aw-${stamp}`);
    const holdCtx = await newContext();
    const holder = await player("holder", holdCtx);
    await play(holder, "hold", args);
    const watcher = await player("watcher");
    await play(watcher, "watch", args);
    // No goodbye: the renderer dies, y-websocket's unload handler never runs.
    const cdp = await holdCtx.newCDPSession(holder);
    void cdp.send("Page.crash").catch(() => {});
    const r = await play(watcher, "gone", args);
    assert.ok(r.gone_ms <= 5_000, JSON.stringify(r));
    assert.deepEqual(r.names, ["bob"]);
  }));

  it("after a hard restart a fresh page reads every saved edit", logged(async () => {
    const room = `e2e-restart-${stamp}`;
    const text = "every word of this was saved before the kill. ".repeat(3);
    const wrote = await play(await player("writer"), "write", { ...(await argsFor(room)), text });
    assert.equal(wrote.text, text);
    const persist = wr.persistDir;
    await wr.kill();
    wr = await Wrangler.start(VARS, persist);
    const read = await play(await player("reader"), "read", await argsFor(room));
    assert.equal(read.text, text);
  }));
});
