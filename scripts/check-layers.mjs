#!/usr/bin/env node
// `npm run lint` step: the layer table in docs/architecture.md is the rule, and the tree must obey
// it. Each row of that table names its folders in backticks; rows are ordered from the bottom
// layer up. Every TypeScript file must belong to exactly one row's folder (the longest matching
// folder wins, so `bridge/core/engine/` can sit on `bridge/core/`), and may import only from its
// own layer or the ones below. A file in no row, a row naming a folder that does not exist, or an
// import that points up fails with the file, the line and both layers named. The doc and the tree
// therefore cannot drift apart without lint failing.
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

// the checkout to check: this one, or another given by its path (the test checks a small made-up tree)
const ROOT = resolve(process.argv[2] ?? resolve(dirname(new URL(import.meta.url).pathname), ".."));
const DOC = join(ROOT, "docs", "architecture.md");
/** Folders that are not layers: tests and benches may import anything; generated and vendored code is not ours. */
const OUTSIDE = ["tests/", "bench/", "scripts/", "dist/", "node_modules/", "python-client/", "scratch/", "docs/"];

/** The rows of the first table under "## Layers": [{ layer, folders }] from the bottom up. */
export function readLayers(text) {
  const section = text.split(/^## Layers\s*$/m)[1]?.split(/^## /m)[0];
  if (!section) throw new Error(`${DOC}: no "## Layers" section`);
  const rows = section.split("\n").filter((l) => l.startsWith("|") && !/^\|\s*-/.test(l)).slice(1);
  return rows.map((row, rank) => {
    const cells = row.split("|").map((c) => c.trim());
    const folders = [...cells[2].matchAll(/`([^`]+\/)`/g)].map((m) => m[1]);
    return { rank, layer: cells[1], folders };
  }).filter((r) => r.folders.length > 0);
}

function tsFiles(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const rel = relative(ROOT, path).split(sep).join("/");
    if (OUTSIDE.some((o) => rel + "/" === o || rel.startsWith(o)) || name.startsWith(".")) continue;
    if (statSync(path).isDirectory()) tsFiles(path, out);
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

function main() {
  const layers = readLayers(readFileSync(DOC, "utf8"));
  const folders = layers.flatMap((l) => l.folders.map((f) => ({ folder: f, layer: l })));
  folders.sort((a, b) => b.folder.length - a.folder.length);
  const problems = [];
  for (const { folder } of folders) {
    if (!existsSync(join(ROOT, folder))) problems.push(`docs/architecture.md names \`${folder}\`, which is not in the tree`);
  }
  const layerOf = (file) => folders.find((f) => file.startsWith(f.folder))?.layer;
  const files = tsFiles(ROOT).filter((f) => f.includes("/"));
  for (const file of files) {
    const mine = layerOf(file);
    if (!mine) {
      problems.push(`${file}: in no layer of docs/architecture.md's table (add its folder to a row)`);
      continue;
    }
    const lines = readFileSync(join(ROOT, file), "utf8").split("\n");
    lines.forEach((line, i) => {
      // static imports, re-exports and dynamic imports of our own files (relative specifiers)
      for (const m of line.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)["'](\.{1,2}\/[^"']+)["']/g)) {
        const target = relative(ROOT, resolve(ROOT, dirname(file), m[1])).split(sep).join("/");
        const theirs = layerOf(target);
        if (theirs && theirs.rank > mine.rank) {
          problems.push(`${file}:${i + 1}: imports ${target}: layer "${mine.layer}" may not import the higher layer "${theirs.layer}"`);
        }
      }
    });
  }
  if (problems.length) {
    console.error(`layers: ${problems.length} problem(s) against docs/architecture.md's table:\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`layers: ${files.length} files in ${layers.length} layers, every import points down or sideways`);
}

main();
