import { join } from "node:path";
import { loadBundle, type EnvBundle } from "../envs/load-bundle.js";

export const FIXTURES = join(import.meta.dirname, "fixtures", "envs");
export const notesBundle = (): EnvBundle => loadBundle(join(FIXTURES, "notes"));
