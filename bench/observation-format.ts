// What observation_format "python" costs per step, by hand (not part of `npm run bench`):
// the tau-bench airline bundle imported twice, identical but for the manifest's
// observation_format, each stepped through an EnvRuntime (engine worker, as the bridge runs it).
//
//   npx tsx bench/observation-format.ts [tau-bench folder] [runs]
//
// Per run and format: 8 episodes of 5 steps per action after a warm-up episode; a run's figure is
// the median step time. Runs alternate json/python so drift on a shared machine hits both alike.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvRuntime } from "../bridge/engine/env-runtime.js";
import { importTaubench } from "../envs/taubench/import-taubench.js";

const TAU = process.argv[2] || join(import.meta.dirname, "..", "..", "shared", "benchmarks", "taubench");
const RUNS = Number(process.argv[3] ?? 7);
const ACTIONS = [
  { name: "get_reservation_details", arguments: { reservation_id: "4WQ150" } },
  { name: "get_user_details", arguments: { user_id: "mia_li_3668" } },
  { name: "search_direct_flight", arguments: { origin: "JFK", destination: "SEA", date: "2024-05-20" } },
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function bundle(format: "json" | "python"): string {
  const out = mkdtempSync(join(tmpdir(), `envscaler-obsfmt-${format}-`));
  const { dir } = importTaubench(TAU, out, ["airline"])[0]!;
  const manifestFile = join(dir, "manifest.json");
  const manifest = JSON.parse(readFileSync(manifestFile, "utf8")) as Record<string, unknown>;
  manifest.observation_format = format;
  writeFileSync(manifestFile, JSON.stringify(manifest));
  return dir;
}

async function run(dir: string, action: unknown): Promise<number> {
  const rt = await EnvRuntime.start({ envs: [dir], workers: 1 });
  const steps: number[] = [];
  try {
    for (let i = 0; i < 9; i++) {
      const { episode_id } = await rt.reset("airline-test-0", i);
      for (let j = 0; j < 5; j++) {
        const t = performance.now();
        await rt.step(episode_id, action);
        if (i > 0) steps.push(performance.now() - t); // the first episode warms the worker up
      }
      await rt.closeEpisode(episode_id);
    }
  } finally {
    await rt.close();
  }
  return median(steps);
}

const dirs = { json: bundle("json"), python: bundle("python") };
for (const action of ACTIONS) {
  const ms: Record<"json" | "python", number[]> = { json: [], python: [] };
  for (let r = 0; r < RUNS; r++) for (const f of ["json", "python"] as const) ms[f].push(await run(dirs[f], action));
  const show = (xs: number[]) => `median ${median(xs).toFixed(3)} ms (runs ${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`;
  console.log(`${action.name}: json ${show(ms.json)}; python ${show(ms.python)}; python − json ${(median(ms.python) - median(ms.json)).toFixed(3)} ms per step`);
}
