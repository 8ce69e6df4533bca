import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The package's version from package.json, the one place it is written. Found by walking up from
 * this module, because the module sits at a different depth in the source tree
 * (protocol/server-version.ts) and in the build (dist/protocol/server-version.js); the name check
 * keeps a package.json of some other folder on the way (none today) from being taken for ours.
 */
export function packageVersion(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "envscaler" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // no package.json here (or not ours): go on up
    }
    if (dirname(dir) === dir) throw new Error(`no envscaler package.json above ${from}`);
  }
}

/** The version the bridge reports in its `hello` reply and stamps on exported snapshots. */
export const SERVER_VERSION = packageVersion();
