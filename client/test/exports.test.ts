//! The entry points export the runtime values client/README.md lists for
//! them, no more and no fewer: the tables under "What `homeroom` exports"
//! , "`homeroom/tuning`" and "`homeroom/yjs`".

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import * as root from "../src/homeroom.js";
import * as tuning from "../src/tuning.js";
import * as yjs from "../src/yjs.js";

/** client/: found upwards, since this runs from test/ as source and from .build/test/ compiled. */
function clientDir(): string {
  for (let d = dirname(fileURLToPath(import.meta.url)); d !== dirname(d); d = dirname(d)) {
    const pkg = join(d, "package.json");
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "homeroom") return d;
  }
  throw new Error("no homeroom package.json above this test");
}

/** The first-column names (`| \`name\` | ...`) of the table in the README section under `heading`. */
function documented(heading: string): string[] {
  const lines = readFileSync(join(clientDir(), "README.md"), "utf8").split(/\r?\n/);
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `README.md has no heading ${heading}`);
  const end = lines.findIndex((l, i) => i > start && l.startsWith("## "));
  const names = lines
    .slice(start + 1, end < 0 ? undefined : end)
    .map((l) => /^\| `([A-Za-z_$][\w$]*)` \|/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined);
  assert.ok(names.length > 0, `README.md: no export table under ${heading}`);
  return names.sort();
}

describe("entry points export what the README documents", () => {
  it("homeroom", () => {
    assert.deepEqual(Object.keys(root).sort(), documented("## What `homeroom` exports"));
  });

  it("homeroom/tuning", () => {
    assert.deepEqual(Object.keys(tuning).sort(), documented("## `homeroom/tuning`"));
  });

  it("homeroom/yjs", () => {
    assert.deepEqual(Object.keys(yjs).sort(), documented("## `homeroom/yjs`"));
  });
});
