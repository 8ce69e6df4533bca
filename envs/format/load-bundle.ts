import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { EnvManifest, Scenario } from "./bundle-schema.js";

/** A JSON object as a bundle's files hold it (bridge/core/state builds its state bases from these). */
type JsonObject = Record<string, unknown>;

/** One problem found while loading a bundle, with the file it is in. */
export interface BundleProblem {
  file: string;
  message: string;
}

export class BundleLoadError extends Error {
  override readonly name = "BundleLoadError";
  constructor(readonly problems: BundleProblem[]) {
    super(problems.map((p) => `${p.file}: ${p.message}`).join("\n"));
  }
}

/** A loaded, schema-valid env bundle: the parsed files. Immutable; its states are built by bridge/core/state/bundle-state.ts. */
export class EnvBundle {
  constructor(
    readonly dir: string,
    readonly manifest: EnvManifest,
    readonly source: string,
    readonly defaultState: JsonObject,
    readonly scenarios: ReadonlyMap<string, Scenario>,
    /** SHA-256 over manifest, source, default state and scenarios: identifies exactly what ran. */
    readonly contentHash: string,
    /** The default state file's text, kept for python-format envs (StateBase.fromStateText). */
    readonly defaultStateText?: string,
  ) {}

  get id(): string {
    return this.manifest.id;
  }

  scenario(id: string): Scenario | undefined {
    return this.scenarios.get(id);
  }

  private readonly scenarioHashes = new Map<string, string>();

  /** SHA-256 of a scenario's definition; every reset reports it, so it is computed once. */
  scenarioHash(scenarioId: string): string {
    let h = this.scenarioHashes.get(scenarioId);
    if (h === undefined) this.scenarioHashes.set(scenarioId, (h = sha256(JSON.stringify(this.scenarios.get(scenarioId)))));
    return h;
  }
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function zodProblems(file: string, error: z.ZodError, prefix = ""): BundleProblem[] {
  return error.issues.map((i) => ({ file, message: `${prefix}${i.path.length ? i.path.join(".") + ": " : ""}${i.message}` }));
}

function readJson(file: string, problems: BundleProblem[]): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    problems.push({ file, message: existsSync(file) ? `not valid JSON: ${(e as Error).message}` : "missing" });
    return undefined;
  }
}

/** The largest env class source a bundle may have (the biggest bundled port, tau-bench retail with its helpers, is ~80 KB). */
export const MAX_SOURCE_BYTES = 4 << 20;

/** Loads one bundle directory (manifest.json, the class source, scenarios.json). */
export function loadBundle(dirPath: string): EnvBundle {
  const dir = resolve(dirPath);
  const problems: BundleProblem[] = [];
  const manifestFile = join(dir, "manifest.json");
  const rawManifest = readJson(manifestFile, problems);
  if (rawManifest === undefined) throw new BundleLoadError(problems);
  const parsed = EnvManifest.safeParse(rawManifest);
  if (!parsed.success) throw new BundleLoadError(zodProblems(manifestFile, parsed.error));
  const manifest = parsed.data;

  const toolNames = manifest.tools.map((t) => t.function.name);
  const dupTools = toolNames.filter((n, i) => toolNames.indexOf(n) !== i);
  if (dupTools.length) problems.push({ file: manifestFile, message: `duplicate tool names: ${dupTools.join(", ")}` });
  // the method answers the names the tool list lacks; a tool of its own name would shadow it
  if (manifest.unlisted_call_method && toolNames.includes(manifest.unlisted_call_method)) problems.push({ file: manifestFile, message: `unlisted_call_method ${manifest.unlisted_call_method} is also a tool name` });
  for (const m of [manifest.action_methods?.start, manifest.action_methods?.end]) if (m && toolNames.includes(m)) problems.push({ file: manifestFile, message: `action method ${m} is also a tool name` });
  for (const t of manifest.terminating_tools) {
    if (!toolNames.includes(t)) problems.push({ file: manifestFile, message: `terminating tool ${t} is not among the tools` });
  }

  const sourceFile = join(dir, manifest.source_file);
  let source = "";
  try {
    // checked before reading: an env's source is evaluated in every sandbox image, so its size is a limit
    const size = statSync(sourceFile).size;
    if (size > MAX_SOURCE_BYTES) problems.push({ file: sourceFile, message: `env class source is ${size} bytes, over the ${MAX_SOURCE_BYTES}-byte limit (MAX_SOURCE_BYTES)` });
    else source = readFileSync(sourceFile, "utf8");
  } catch {
    problems.push({ file: sourceFile, message: "missing env class source" });
  }

  let defaultState: JsonObject = manifest.default_state ?? {};
  let defaultStateText: string | undefined;
  if (manifest.default_state_file) {
    const file = join(dir, manifest.default_state_file);
    const raw = readJson(file, problems);
    if (raw !== undefined && (raw === null || typeof raw !== "object" || Array.isArray(raw))) problems.push({ file, message: "the default state must be a JSON object" });
    else if (raw !== undefined) {
      defaultState = raw as JsonObject;
      // python-format envs read the state as the file writes it (dict order, 46.0)
      if (manifest.observation_format === "python") defaultStateText = readFileSync(file, "utf8");
    }
  }

  const scenariosFile = join(dir, "scenarios.json");
  const scenarios = new Map<string, Scenario>();
  const rawScenarios = existsSync(scenariosFile) ? readJson(scenariosFile, problems) : [];
  if (rawScenarios !== undefined && !Array.isArray(rawScenarios)) problems.push({ file: scenariosFile, message: "must be a JSON array of scenarios" });
  else if (Array.isArray(rawScenarios)) {
    rawScenarios.forEach((raw, i) => {
      const label = `scenario[${i}]${raw && typeof raw === "object" && "id" in raw ? ` (${String((raw as { id: unknown }).id)})` : ""}: `;
      const s = Scenario.safeParse(raw);
      if (!s.success) return problems.push(...zodProblems(scenariosFile, s.error, label));
      if (s.data.env_id !== manifest.id) problems.push({ file: scenariosFile, message: `${label}env_id ${s.data.env_id} is not this bundle's id ${manifest.id}` });
      if (scenarios.has(s.data.id)) problems.push({ file: scenariosFile, message: `${label}duplicate scenario id` });
      for (const a of s.data.reference_actions ?? []) {
        if (!toolNames.includes(a.name)) problems.push({ file: scenariosFile, message: `${label}reference action ${a.name} is not a tool` });
      }
      scenarios.set(s.data.id, s.data);
    });
  }
  if (problems.length) throw new BundleLoadError(problems);
  const contentHash = sha256(JSON.stringify([manifest, source, defaultState, [...scenarios.values()]]));
  return new EnvBundle(dir, manifest, source, defaultState, scenarios, contentHash, defaultStateText);
}

/** True when `dir` is a bundle (has a manifest.json) rather than a folder of bundles. */
export function isBundleDir(dir: string): boolean {
  return existsSync(join(dir, "manifest.json"));
}

/** The bundle directories at `path`: the path itself if it is a bundle, else its bundle subfolders. */
export function findBundleDirs(path: string): string[] {
  const root = resolve(path);
  if (!existsSync(root) || !statSync(root).isDirectory()) throw new BundleLoadError([{ file: root, message: "not a directory" }]);
  if (isBundleDir(root)) return [root];
  return readdirSync(root)
    .map((name) => join(root, name))
    .filter((d) => statSync(d).isDirectory() && isBundleDir(d))
    .sort();
}
