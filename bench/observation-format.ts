// What observation_format "python" costs per step, by hand (not part of `npm run bench`):
// the tau-bench airline bundle imported twice, identical but for the manifest's
// observation_format, each step a tool call on an EnvSession (the sandbox call, the guest's
// rendering, the host's change tracking: everything the format changes; the engine worker and the
// wire around it are the same for both formats).
//
//   npx tsx bench/observation-format.ts [tau-bench folder] [runs] [tool,tool]
//
// Per run, format and action: a warm-up episode, then 8 episodes of 5 calls; a run's figure is the
// median call. Both wall time and this process's CPU time (user + system) are reported: on a
// shared, loaded machine the CPU time is the steadier of the two. Runs alternate json/python so
// that drift hits both alike. Also reported: the session open (reset) time, where python envs
// additionally evaluate the Py layer.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvSession } from "../bridge/core/episode/env-session.js";
import { SandboxHost } from "../bridge/core/sandbox/sandbox-host.js";
import { bundleStateBase } from "../bridge/core/state/bundle-state.js";
import { loadBundle, type EnvBundle } from "../envs/format/load-bundle.js";
import { importTaubench } from "../envs/taubench/import-taubench.js";

const TAU = process.argv[2] || join(import.meta.dirname, "..", "..", "shared", "benchmarks", "taubench");
const RUNS = Number(process.argv[3] ?? 7);
const ALL_ACTIONS: { name: string; arguments: Record<string, unknown> }[] = [
  { name: "get_reservation_details", arguments: { reservation_id: "4WQ150" } },
  { name: "get_user_details", arguments: { user_id: "mia_li_3668" } },
  { name: "search_direct_flight", arguments: { origin: "JFK", destination: "SEA", date: "2024-05-20" } },
];
// an optional third argument picks tools by name, comma-separated
const ACTIONS = process.argv[4] ? ALL_ACTIONS.filter((a) => process.argv[4]!.split(",").includes(a.name)) : ALL_ACTIONS;
type Format = "json" | "python";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

function bundle(format: Format): EnvBundle {
  const out = mkdtempSync(join(tmpdir(), `envscaler-obsfmt-${format}-`));
  const { dir } = importTaubench(TAU, out, ["airline"])[0]!;
  const manifestFile = join(dir, "manifest.json");
  const manifest = JSON.parse(readFileSync(manifestFile, "utf8")) as Record<string, unknown>;
  manifest.observation_format = format;
  writeFileSync(manifestFile, JSON.stringify(manifest));
  return loadBundle(dir);
}

interface Sample {
  wall: number;
  cpu: number;
}

/** The sessions' wasm instances (this script is their one engine). */
const sandboxes = new SandboxHost();

async function run(b: EnvBundle, action: (typeof ACTIONS)[number]): Promise<{ step: Sample; open: Sample }> {
  const base = bundleStateBase(b, "airline-test-0");
  const steps: Sample[] = [];
  const opens: Sample[] = [];
  for (let i = 0; i < 9; i++) {
    let w = performance.now();
    let c = cpuMs();
    const s = await EnvSession.open(b, base, { seed: i, sandboxes });
    if (i > 0) opens.push({ wall: performance.now() - w, cpu: cpuMs() - c });
    try {
      for (let j = 0; j < 5; j++) {
        w = performance.now();
        c = cpuMs();
        const out = s.call(action.name, action.arguments);
        if (i > 0) steps.push({ wall: performance.now() - w, cpu: cpuMs() - c });
        if (out.kind !== "result") throw new Error(`${action.name}: ${JSON.stringify(out.error)}`);
      }
    } finally {
      s.dispose();
    }
  }
  const med = (xs: Sample[]) => ({ wall: median(xs.map((x) => x.wall)), cpu: median(xs.map((x) => x.cpu)) });
  return { step: med(steps), open: med(opens) };
}

const bundles: Record<Format, EnvBundle> = { json: bundle("json"), python: bundle("python") };
const show = (xs: number[]) => `${median(xs).toFixed(3)} ms (runs ${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`;
for (const action of ACTIONS) {
  const res: Record<Format, { step: Sample; open: Sample }[]> = { json: [], python: [] };
  for (let r = 0; r < RUNS; r++) for (const f of ["json", "python"] as const) res[f].push(await run(bundles[f], action));
  for (const what of ["step", "open"] as const) {
    if (what === "open" && action !== ACTIONS[0]) continue;
    for (const m of ["cpu", "wall"] as const) {
      const j = res.json.map((x) => x[what][m]);
      const p = res.python.map((x) => x[what][m]);
      console.log(`${what === "step" ? action.name : "session open (reset)"} ${m}: json ${show(j)}; python ${show(p)}; python − json ${(median(p) - median(j)).toFixed(3)} ms`);
    }
  }
}
sandboxes.dispose();
