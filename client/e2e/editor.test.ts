//! The demo's document editor (examples/editor, served at /editor.html) in headless Chromium
//! against a real `wrangler dev`: the stock `y-websocket` provider, bundled as npm ships it.
//! Two tabs type at once and converge; each sees the other in awareness; a third tab opened
//! late gets the whole document; a tab that reloads gets it again from the room.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";

import { context, FROM, launch, withLogs, page, screenshot } from "./browser.js";
import { Wrangler } from "./runtime.js";

let wr: Wrangler;
let browser: Browser;
const logs: string[] = [];
const contexts: BrowserContext[] = [];
const DOC = "e2e-doc-" + Date.now().toString(36);

const logged = withLogs(() => [
  ["page logs", logs.slice(-40).join("\n")],
  ["wrangler dev (last 60 lines)", wr?.tail(60) ?? ""],
]);

async function open(user: string): Promise<Page> {
  const ctx = await context(browser, FROM.virginia);
  contexts.push(ctx);
  const p = await page(ctx, `${wr.origin}/editor.html?doc=${DOC}&user=${user}`, logs, user);
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

before(async () => {
  wr = await Wrangler.start();
  browser = await launch();
});

after(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close().catch(() => {});
  await wr?.stop();
});

describe("the document editor in Chromium", { timeout: 120_000 }, () => {
  it("two tabs type at once and converge, see each other, and a late tab and a reload get it all", logged(async () => {
    const ann = await open("ann");
    const bob = await open("bob");
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

    const cat = await open("cat");
    await until("a late tab gets the whole document", async () => (await value(cat)) === text);
    await until("and is seen", async () => (await who(ann)).includes("cat"));

    await bob.reload();
    await bob.waitForSelector("#status[data-synced=true]", { timeout: 30_000 });
    await until("a reloaded tab gets it again", async () => (await value(bob)) === text);
    await until("and the old tab of bob is gone from awareness", async () =>
      (await who(ann)).filter((n) => n === "bob").length === 1);
    await screenshot(ann, "editor");
  }));
});
