import { existsSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import { findBundleDirs } from "../envs/format/load-bundle.js";

/** The bundled envs: folder name (`library`) and env id (`library-v1`) of each bundle folder. */
export function bundledEnvs(root = BUNDLED_ENVS): { name: string; id: string; dir: string }[] {
  return findBundleDirs(root).map((dir) => {
    let id = basename(dir);
    try {
      const manifestId = (JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as { id?: unknown }).id;
      if (typeof manifestId === "string") id = manifestId;
    } catch {
      // an unreadable manifest is the bundle loader's to report; the folder name still names it
    }
    return { name: basename(dir), id, dir };
  });
}

/**
 * `--envs` entries as folders: a path that exists is taken as it is (relative to the working
 * directory); any other entry must name a bundled env, by folder name (`library`) or env id
 * (`library-v1`). An entry that is neither is an error that says where it was looked for and
 * which ids there are.
 */
export function resolveEnvFolders(entries: string[], root = BUNDLED_ENVS): string[] {
  let bundled: ReturnType<typeof bundledEnvs> | null = null;
  return entries.map((entry) => {
    if (existsSync(entry)) return entry;
    bundled ??= bundledEnvs(root);
    // an id has no slash: a path that does not exist is a missing folder, not an unknown id
    const pathLike = /[\\/]/.test(entry);
    const hit = pathLike ? undefined : bundled.find((b) => b.name === entry || b.id === entry);
    if (hit) return hit.dir;
    const ids = bundled.map((b) => (b.name === b.id ? b.id : `${b.name} (${b.id})`)).join(", ");
    const looked = pathLike ? "" : `, and no bundled env is named ${entry} (looked in ${root})`;
    throw new Error(`--envs ${entry}: there is no folder ${resolve(entry)}${looked}; the bundled envs are: ${ids}`);
  });
}
