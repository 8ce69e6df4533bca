import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const TAUBENCH_DOMAINS = {
  retail: { className: "TauRetailEnv", tables: ["users", "orders", "products"], name: "tau-bench retail" },
  airline: { className: "TauAirlineEnv", tables: ["users", "reservations", "flights"], name: "tau-bench airline" },
} as const;
export type TaubenchDomain = keyof typeof TAUBENCH_DOMAINS;

/** Our JavaScript ports of the tools, shipped with the package (the data is not: it is read from the user's copy). */
const SOURCES = import.meta.url.endsWith(".ts") ? import.meta.dirname : resolve(import.meta.dirname, "..", "..", "..", "envs", "taubench");

interface TauTask {
  id: string;
  user_id: string;
  instruction: string;
  actions: { name: string; arguments: Record<string, unknown> }[];
  outputs: string[];
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, "utf8")) as T;

/** A domain's env.js: the shared Python-semantics helpers (tau-python.js), then the domain's class. */
export function taubenchSource(domain: TaubenchDomain): string {
  const files = [join(SOURCES, "tau-python.js"), join(SOURCES, `${domain}-env.js`)];
  for (const f of files) if (!existsSync(f)) throw new Error(`the JavaScript port of the ${domain} tools is incomplete: ${f} is missing`);
  return files.map((f) => readFileSync(f, "utf8")).join("\n");
}

/**
 * Writes `taubench-<domain>-v1` bundles from a tau-bench data folder: the domain's policy as
 * introduction and rules, its tool schemas, our JS tools, the database as the default state, and
 * every task as a conversation scenario scored the tau-bench way (all-or-nothing: the final
 * database equals the one the ground-truth actions produce, and every required output was said).
 */
export function importTaubench(from: string, out: string, domains: TaubenchDomain[] = ["retail", "airline"]): { envId: string; dir: string; scenarios: number }[] {
  const written: { envId: string; dir: string; scenarios: number }[] = [];
  for (const domain of domains) {
    const src = join(from, domain);
    if (!existsSync(src)) throw new Error(`${src} does not exist: --from must be a tau-bench folder with retail/ and airline/`);
    const spec = TAUBENCH_DOMAINS[domain];
    const envId = `taubench-${domain}-v1`;
    const dir = join(out, `taubench-${domain}`);
    mkdirSync(dir, { recursive: true });
    // the data files' own text, not JSON.stringify(JSON.parse(...)): that would list integer-like
    // keys (product and variant ids) first and ascending, and write 46.0 as 46
    const tables = spec.tables.map((t) => {
      const file = join(src, "data", `${t}.json`);
      const text = readFileSync(file, "utf8");
      try {
        JSON.parse(text);
      } catch (e) {
        throw new Error(`${file} is not valid JSON: ${(e as Error).message}`, { cause: e });
      }
      return `${JSON.stringify(t)}: ${text.trim()}`;
    });
    writeFileSync(join(dir, "state.json"), `{${tables.join(",\n")}}\n`);
    writeFileSync(join(dir, "env.js"), taubenchSource(domain));
    const manifest = {
      format: "envscaler.env/v1",
      id: envId,
      name: spec.name,
      introduction: readFileSync(join(src, "wiki.md"), "utf8"),
      rules: readJson<string[]>(join(src, "rules.json")),
      class_name: spec.className,
      source_file: "env.js",
      tools: readJson<unknown[]>(join(src, "tools.json")),
      terminating_tools: ["transfer_to_human_agents"],
      // tau-bench's tools return str: json.dumps(...) or a message; the agent reads that text
      observation_format: "python",
      max_steps: 30,
      default_state_file: "state.json",
      limits: { memory_mb: 512, call_timeout_ms: 5000 },
    };
    writeFileSync(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 1)}\n`);
    const scenarios = readdirSync(src)
      .filter((f) => /^tasks_\w+\.json$/.test(f))
      .sort()
      .flatMap((f) => readJson<TauTask[]>(join(src, f)))
      .map((t) => ({
        id: t.id,
        env_id: envId,
        mode: "conversation",
        task: t.instruction,
        user_instructions: t.instruction,
        reward: "all",
        checks: [{ kind: "reference_state", description: "the final database equals the one the ground-truth actions produce", match_new_ids: false }, ...(t.outputs.length ? [{ kind: "outputs", outputs: t.outputs }] : [])],
        reference_actions: t.actions,
        ...(t.outputs.length ? { reference_messages: [t.outputs.join(", ")] } : {}),
      }));
    writeFileSync(join(dir, "scenarios.json"), `${JSON.stringify(scenarios)}\n`);
    written.push({ envId, dir, scenarios: scenarios.length });
  }
  return written;
}
