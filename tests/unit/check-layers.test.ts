// The layer rule of docs/architecture.md, as `npm run lint` enforces it: the real tree passes, and
// a made-up tree fails for an upward import, a file in no layer and a layer folder that is gone.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { expect, test } from "vitest";

const ROOT = resolve(import.meta.dirname, "..", "..");
const SCRIPT = join(ROOT, "scripts", "check-layers.mjs");

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "layers-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

const DOC = "# A\n\n## Layers\n\n| layer | folder | holds |\n| --- | --- | --- |\n| low | `low/` | x |\n| high | `high/` | y |\n\n## Next\n";

test("this repository's imports all point down its layer table", () => {
  expect(execFileSync("node", [SCRIPT], { encoding: "utf8" })).toMatch(/every import points down or sideways/);
});

test("an upward import, a file in no layer and a layer folder that is gone each fail, named", () => {
  const ok = tree({ "docs/architecture.md": DOC, "low/a.ts": "export const a = 1;\n", "high/b.ts": 'import { a } from "../low/a.js";\nexport const b = a;\n' });
  expect(spawnSync("node", [SCRIPT, ok], { encoding: "utf8" }).status).toBe(0);
  const bad = tree({
    "docs/architecture.md": DOC.replace("| high | `high/` | y |", "| high | `high/`, `gone/` | y |"),
    "low/a.ts": 'import { b } from "../high/b.js";\nexport const a = b;\n',
    "high/b.ts": "export const b = 1;\n",
    "stray/c.ts": "export const c = 1;\n",
  });
  const r = spawnSync("node", [SCRIPT, bad], { encoding: "utf8" });
  expect(r.status).toBe(1);
  expect(r.stderr).toContain('low/a.ts:1: imports high/b.js: layer "low" may not import the higher layer "high"');
  expect(r.stderr).toContain("stray/c.ts: in no layer");
  expect(r.stderr).toContain("names `gone/`, which is not in the tree");
});
