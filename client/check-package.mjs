// client/check-package.mjs: checks the package `npm pack` would publish and
// its size budget. Run after scripts/build-client (scripts/test does).
//
//   - package.json: name homeroom, public, Apache-2.0, ESM, no runtime
//     dependencies, react, yjs and y-websocket optional peers, the five entry points;
//   - the tarball's files: each entry's .js and .d.ts, README, LICENSE, and
//     nothing of the tests, the demo or the build;
//   - each entry point bundled as an app would (esbuild --bundle --minify,
//     react, yjs and y-websocket external), gzipped: printed with its budget, fails over it.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const CLIENT = dirname(fileURLToPath(import.meta.url));

/** min+gzip bytes allowed per entry point; today's sizes are printed next to them. */
const BUDGET = { ".": 11_500, "./react": 12_000, "./token": 1_800, "./tuning": 3_000, "./yjs": 2_500 };

const problems = [];
const check = (ok, what) => ok || problems.push(what);

const pkg = JSON.parse(readFileSync(join(CLIENT, "package.json"), "utf8"));
check(pkg.name === "homeroom", `name is ${pkg.name}, want homeroom`);
check(pkg.private !== true, "the package is private");
check(pkg.license === "Apache-2.0", `license ${pkg.license}`);
check(pkg.type === "module", "not ESM (type: module)");
check(!pkg.dependencies || Object.keys(pkg.dependencies).length === 0, `runtime dependencies: ${JSON.stringify(pkg.dependencies)}`);
check(pkg.peerDependencies?.react === ">=18" && pkg.peerDependenciesMeta?.react?.optional === true, "react must be an optional peer >=18");
check(JSON.stringify(Object.keys(BUDGET)) === JSON.stringify(Object.keys(pkg.exports).filter((k) => k !== "./package.json")), "entry points differ from the budget's");

const [packed] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: CLIENT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }));
const files = new Set(packed.files.map((f) => f.path));
for (const [entry, target] of Object.entries(pkg.exports)) {
  if (entry === "./package.json") continue;
  for (const f of [target.import, target.types]) check(files.has(f.replace(/^\.\//, "")), `${entry}: ${f} is not in the tarball`);
}
for (const f of ["README.md", "LICENSE", "package.json"]) check(files.has(f), `${f} is not in the tarball`);
for (const f of files) check(/^(dist|src)\/|^(README\.md|LICENSE|package\.json)$/.test(f), `${f} should not be published`);
check(readFileSync(join(CLIENT, "LICENSE"), "utf8").includes("Apache License"), "LICENSE is not the Apache License");

console.log(`npm pack: ${packed.filename}, ${packed.files.length} files, ${packed.size} bytes packed`);
console.log("entry      min+gzip   budget   (esbuild --bundle --minify, react external, gzip -9)");
for (const [entry, budget] of Object.entries(BUDGET)) {
  const out = await build({
    entryPoints: [join(CLIENT, pkg.exports[entry].import)],
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2020",
    external: ["react", "yjs", "y-websocket"],
    legalComments: "none",
    write: false,
    logLevel: "silent",
  });
  const min = out.outputFiles[0].contents;
  const gz = gzipSync(min, { level: 9 }).length;
  console.log(`${entry.padEnd(10)} ${String(gz).padStart(8)} ${String(budget).padStart(8)}   (${min.length} minified)`);
  check(gz <= budget, `${entry} is ${gz} bytes min+gzip, over its budget of ${budget}`);
}

if (problems.length) {
  console.error("check-package: " + problems.join("\ncheck-package: "));
  process.exit(1);
}
console.log("package ok");
