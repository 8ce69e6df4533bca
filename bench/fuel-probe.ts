// One process's in-process step and reset times for the fuel-cost row of `npm run bench`: run it
// with and without ENVSCALER_NO_FUEL=1 (read once per thread, so each setting needs its own
// process). Prints one JSON line: {"step_us": p50, "reset_us": p50}.
import { Episode } from "../bridge/core/episode/episode.js";
import { SandboxHost } from "../bridge/core/sandbox/sandbox-host.js";
import { EnvRegistry } from "../envs/format/registry.js";
import { median } from "./rows.js";

/** The four read tools of the peer rows (bench/py/peer.py READS), on library-1's real state. */
const READS = [
  { name: "get_member", arguments: { member_id: "M013" } },
  { name: "search_books", arguments: { query: "the" } },
  { name: "list_member_loans", arguments: { member_id: "M013" } },
  { name: "get_book", arguments: { book_id: "B006" } },
];

const [envs, n] = [process.argv[2]!, Number(process.argv[3] ?? 2000)];
const found = EnvRegistry.load([envs]).scenario("library-1")!;
const sandboxes = new SandboxHost();
const episode = new Episode({ bundle: found.bundle, scenario: found.scenario, seed: 0, episodeId: "fuel", sandboxes });
await episode.reset();
const steps: number[] = [];
for (let i = 0; i < n + 500; i++) {
  const t = performance.now();
  await episode.step(READS[i % 4]);
  if (i >= 500) steps.push((performance.now() - t) * 1000); // the first 500 warm the JIT
}
episode.close();
const resets: number[] = [];
for (let i = 0; i < 300; i++) {
  const e = new Episode({ bundle: found.bundle, scenario: found.scenario, seed: i, episodeId: `r${i}`, sandboxes });
  const t = performance.now();
  await e.reset();
  if (i >= 50) resets.push((performance.now() - t) * 1000);
  e.close();
}
sandboxes.dispose();
console.log(JSON.stringify({ step_us: median(steps), reset_us: median(resets) }));
