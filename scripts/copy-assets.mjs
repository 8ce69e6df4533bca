// Copies the non-TypeScript files the compiled package reads at run time into dist/.
import { chmodSync, copyFileSync, cpSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";

for (const file of ["bridge/core/sandbox/prelude.js", "bridge/core/sandbox/python-values.js"]) {
  mkdirSync(dirname(`dist/${file}`), { recursive: true });
  copyFileSync(file, `dist/${file}`);
}
// the UI's pages, scripts and styles are served from next to its compiled server
cpSync("bridge/fronts/ui/assets", "dist/bridge/fronts/ui/assets", { recursive: true });
chmodSync("dist/cli/main.js", 0o755);
