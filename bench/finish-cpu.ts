// CPU time of scoring (`finish`) and of `reset` for one scenario, in process: the figure behind the
// CHANGELOG's scoring entry. CPU time, not wall time, so a loaded machine moves it less. Compare two
// builds by running each one's copy alternately:
//   node dist/bench/finish-cpu.js [scenario]   →   {"scen", "finish_cpu_us", "reset_cpu_us"}
// Each of 10 batches plays 40 episodes (reset, the first two reference actions, finish) with the
// reference state cached as the engine caches it; the median batch mean is printed (2 batches warm up).
import { Episode } from "../bridge/core/episode/episode.js";
import { ReferenceCache } from "../bridge/core/episode/reference-state.js";
import { SandboxHost } from "../bridge/core/sandbox/sandbox-host.js";
import { EnvRegistry } from "../envs/format/registry.js";
import { median } from "./rows.js";

const scenarioId = process.argv[2] ?? "library-1";
const found = EnvRegistry.load(["envs"]).scenario(scenarioId);
if (!found) throw new Error(`no scenario ${scenarioId} in envs/`);
const sandboxes = new SandboxHost();
const cache = new ReferenceCache(sandboxes);
const cpu = (since: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(since);
  return d.user + d.system;
};
const finishes: number[] = [];
const resets: number[] = [];
for (let batch = 0; batch < 12; batch++) {
  let finish = 0;
  let reset = 0;
  for (let i = 0; i < 40; i++) {
    const seed = i % 4;
    const e = new Episode({ bundle: found.bundle, scenario: found.scenario, seed, episodeId: `b${batch}-${i}`, sandboxes, reference: () => cache.get(found.bundle, scenarioId, seed) });
    let t = process.cpuUsage();
    await e.reset();
    reset += cpu(t);
    for (const a of (found.scenario.reference_actions ?? []).slice(0, 2)) await e.step(a);
    t = process.cpuUsage();
    await e.finish();
    finish += cpu(t);
    e.close();
  }
  if (batch >= 2) {
    finishes.push(finish / 40);
    resets.push(reset / 40);
  }
}
sandboxes.dispose();
console.log(JSON.stringify({ scen: scenarioId, finish_cpu_us: Math.round(median(finishes)), reset_cpu_us: Math.round(median(resets)) }));
