// Copies the non-TypeScript files the compiled package reads at run time into dist/.
import { chmodSync, copyFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";

for (const file of ["bridge/sandbox/prelude.js", "bridge/sandbox/python-values.js"]) {
  mkdirSync(dirname(`dist/${file}`), { recursive: true });
  copyFileSync(file, `dist/${file}`);
}
chmodSync("dist/cli/main.js", 0o755);
