import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join, resolve, sep } from "node:path";
import type { EnvRegistry } from "../../../envs/format/registry.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import { BUNDLED_ENVS } from "../../../envs/bundled.js";
import { ApiError } from "./http-util.js";

/**
 * Where a bundle came from. Manifests carry no provenance field, so it is inferred from the files
 * around the bundle: `envscaler synth` leaves `<run>/envs/<env>/` next to `<run>/report.json` and
 * `<run>/build/<env>/build-report.json`; `envscaler import taubench|bfcl|acebench` writes
 * `taubench-*`, `bfcl-*` and `acebench-*` bundles; the rest is a local folder we know nothing about
 * (neutral: an imported or synthesized bundle copied elsewhere is not hand-written).
 */
export type Provenance =
  | { kind: "synth"; run: string }
  | { kind: "import"; from: string }
  | { kind: "bundled" }
  | { kind: "local" };

interface Rejection {
  item: string;
  reason: string;
}

interface SynthRunReport {
  mine?: { input: string; envs: number; rejected: Rejection[] };
  build?: { envs: { env_id: string; topic: string; pass_rate: number; kept: boolean; cases: number }[]; rejected: Rejection[] };
  scenarios?: { envs: Record<string, string[]>; rejected: Rejection[]; check: Record<string, string[]> };
  usage?: Record<string, unknown>;
}

/** What the UI shows of a synth run for one env: the dual-agent evidence and what was rejected on the way. */
export interface SynthEvidence {
  run: string;
  topic?: string;
  pass_rate?: number;
  kept?: boolean;
  /** Every dual-agent test case (tool, arguments, observation, diff, the judge's verdict and reason). */
  cases: unknown[];
  scenarios_kept: string[];
  /** Rejections that name this env or its scenarios. */
  rejected: Rejection[];
  /** The run's other rejections (mined tasks, other envs), for context. */
  run_rejected: { stage: string; item: string; reason: string }[];
  usage?: Record<string, unknown>;
}

const readJson = <T>(path: string): T | undefined => {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return undefined;
  }
};

export function provenanceOf(bundle: EnvBundle): Provenance {
  const run = dirname(dirname(bundle.dir));
  if (basename(dirname(bundle.dir)) === "envs" && existsSync(join(run, "report.json"))) return { kind: "synth", run };
  if (/^taubench-/.test(bundle.id)) return { kind: "import", from: "tau-bench (envscaler import taubench)" };
  if (/^bfcl-/.test(bundle.id)) return { kind: "import", from: "BFCL v3 multi-turn (envscaler import bfcl)" };
  if (/^acebench-/.test(bundle.id)) return { kind: "import", from: "ACEBench-Agent (envscaler import acebench)" };
  const shipped = resolve(BUNDLED_ENVS) + sep;
  if ((bundle.dir + sep).startsWith(shipped)) return { kind: "bundled" };
  return { kind: "local" };
}

function synthEvidence(bundle: EnvBundle, run: string): SynthEvidence {
  const report = readJson<SynthRunReport>(join(run, "report.json")) ?? {};
  const buildDir = join(run, "build");
  let buildReport: { topic?: string; pass_rate?: number; kept?: boolean; cases?: unknown[] } | undefined;
  if (existsSync(buildDir)) {
    for (const d of readdirSync(buildDir)) {
      const r = readJson<{ env_id?: string }>(join(buildDir, d, "build-report.json"));
      if (r?.env_id === bundle.id) buildReport = r as typeof buildReport;
    }
  }
  const entry = report.build?.envs.find((e) => e.env_id === bundle.id);
  const mine = (report.mine?.rejected ?? []).map((r) => ({ stage: "mine", ...r }));
  const build = (report.build?.rejected ?? []).map((r) => ({ stage: "build", ...r }));
  const scen = (report.scenarios?.rejected ?? []).map((r) => ({ stage: "scenarios", ...r }));
  const mine_ = (r: { item: string }) => r.item === bundle.id || r.item.startsWith(`${bundle.id} `);
  return {
    run,
    topic: buildReport?.topic ?? entry?.topic,
    pass_rate: buildReport?.pass_rate ?? entry?.pass_rate,
    kept: buildReport?.kept ?? entry?.kept,
    cases: buildReport?.cases ?? [],
    scenarios_kept: report.scenarios?.envs[bundle.id] ?? [],
    rejected: [...build, ...scen].filter(mine_),
    run_rejected: [...mine, ...build, ...scen].filter((r) => !mine_(r)),
    usage: report.usage,
  };
}

export interface EnvSummary {
  id: string;
  name: string;
  introduction: string;
  tools: string[];
  scenarios: { id: string; mode: string; task: string }[];
  provenance: Provenance;
}

/** The envs the UI serves, for reading: summaries with search, and each env in full. */
export class EnvCatalog {
  constructor(private readonly registry: EnvRegistry) {}

  list(query = ""): EnvSummary[] {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    return this.registry
      .list()
      .map((b) => ({
        id: b.id,
        name: b.manifest.name,
        introduction: b.manifest.introduction,
        tools: b.manifest.tools.map((t) => t.function.name),
        scenarios: [...b.scenarios.values()].map((s) => ({ id: s.id, mode: s.mode, task: s.task })),
        provenance: provenanceOf(b),
      }))
      .filter((s) => {
        if (!words.length) return true;
        // every word must appear somewhere: id, name, introduction, a tool name, a scenario id or task
        const hay = [s.id, s.name, s.introduction, ...s.tools, ...s.scenarios.flatMap((x) => [x.id, x.task])].join("\n").toLowerCase();
        return words.every((w) => hay.includes(w));
      })
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  get(id: string): Record<string, unknown> {
    const b = this.registry.env(id);
    if (!b) throw new ApiError(404, "unknown_env", `no env ${id}`);
    const m = b.manifest;
    const provenance = provenanceOf(b);
    return {
      id: b.id,
      name: m.name,
      introduction: m.introduction,
      rules: m.rules,
      tools: m.tools,
      state_schema: m.state_schema ?? null,
      terminating_tools: m.terminating_tools,
      max_steps: m.max_steps,
      clock: m.clock,
      limits: m.limits,
      dir: b.dir,
      content_hash: b.contentHash,
      scenarios: [...b.scenarios.values()],
      provenance,
      synth: provenance.kind === "synth" ? synthEvidence(b, provenance.run) : null,
    };
  }
}
