// `npm run bench:builds -- --baseline DIR`: this checkout's serving figures next to another
// checkout's (a commit before a redesign, built side by side: `git worktree add DIR REV && cd DIR
// && bash scripts/install.sh && npm run build`), in one run. Both are started the way users start
// them (`envscaler serve` from each build's dist), on the same env folder, and driven by the same
// Python client (this checkout's, from the bench venv) through bench/py/peer.py and fork_group.py,
// the two builds alternating within every repetition so load from elsewhere falls on both.
// Prints a table (median [min–max] of the repetitions) and writes bench/builds.md.
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { libraryForBench } from "./openenv-peer.js";
import { benchPython } from "./bench-venv.js";
import { median, spread, versus } from "./rows.js";

const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, import.meta.url.endsWith(".ts") ? ".." : "../..");

interface Server {
  endpoints: string[];
  /** The replica processes (children of serve), whose CPU the pipe rows read. */
  replicaPids: number[];
  stop: () => Promise<void>;
}

/** Starts `envscaler serve` from the build in `root` and waits for the line it prints once serving. */
async function serve(root: string, envs: string, replicas: number): Promise<Server> {
  const cli = join(root, "dist", "cli", "main.js");
  if (!existsSync(cli)) throw new Error(`${cli} is missing: build that checkout first (npm run build)`);
  const child: ChildProcess = spawn(process.execPath, [cli, "serve", "--envs", envs, "--endpoint", "tcp://127.0.0.1:*", "--replicas", String(replicas), "--max-sessions", "8192", "--no-record"], { cwd: root, stdio: ["ignore", "pipe", "ignore"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const line = await new Promise<string>((res, rej) => {
    const rl = createInterface({ input: child.stdout! });
    rl.on("line", (l) => { if (l.startsWith("{\"serving\"")) res(l); });
    child.once("exit", (code) => rej(new Error(`serve from ${root} exited (${code}) before serving`)));
  });
  const endpoints = (JSON.parse(line) as { serving: string[] }).serving;
  const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  return {
    endpoints,
    replicaPids: children,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

async function py(python: string, script: string, args: string[]): Promise<Record<string, number>> {
  const { stdout } = await execFileAsync(python, [join(ROOT, "bench", "py", script), ...args], { encoding: "utf8", cwd: join(ROOT, "bench", "py"), maxBuffer: 16 << 20 });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, number>;
}

interface Measure {
  what: string;
  unit: string;
  higherIsBetter: boolean;
  /** One measurement against one build's servers. */
  take: (python: string, one: Server, two: Server) => Promise<number>;
}

function measures(quick: boolean, envs: string): Measure[] {
  const n = quick ? "500" : "2000";
  const seconds = quick ? "1.5" : "3";
  const resets = quick ? "60" : "300";
  const ep = (s: Server) => s.endpoints[0]!;
  const pid = (s: Server) => String(s.replicaPids[0]);
  return [
    { what: "wire: step p50, 1 session", unit: "µs", higherIsBetter: false, take: async (p, s) => (await py(p, "peer.py", ["rtt", "--system", "ours", "--endpoint", ep(s), "--n", n])).p50_us! },
    { what: "wire: 64 sessions, env-steps/s", unit: "/s", higherIsBetter: true, take: async (p, s) => (await py(p, "peer.py", ["pipe", "--system", "ours", "--endpoint", ep(s), "--sessions", "64", "--seconds", seconds, "--server-pid", pid(s)])).steps_per_s! },
    { what: "wire: reset p50 (in place)", unit: "ms", higherIsBetter: false, take: async (p, s) => (await py(p, "peer.py", ["reset", "--system", "ours", "--endpoint", ep(s), "--n", resets])).p50_ms! },
    { what: "wire: 512 sessions reset at once, resets/s", unit: "/s", higherIsBetter: true, take: async (p, s) => (await py(p, "peer.py", ["burst", "--system", "ours", "--endpoint", ep(s), "--sessions", "512"])).resets_per_s! },
    { what: "client (EnvScalerEnv): step p50", unit: "µs", higherIsBetter: false, take: async (p, s) => (await py(p, "peer.py", ["rtt", "--client", "--system", "ours", "--endpoint", ep(s), "--n", n])).p50_us! },
    { what: "client (EnvScalerEnv): reset p50 of a live episode", unit: "ms", higherIsBetter: false, take: async (p, s) => (await py(p, "peer.py", ["reset", "--client", "--system", "ours", "--endpoint", ep(s), "--n", resets])).p50_ms! },
    { what: "client (vector env): 64 sessions, env-steps/s", unit: "/s", higherIsBetter: true, take: async (p, s) => (await py(p, "peer.py", ["pipe", "--client", "--system", "ours", "--endpoint", ep(s), "--sessions", "64", "--seconds", seconds, "--server-pid", pid(s)])).steps_per_s! },
    { what: "client (vector env): fork group of 64 on 2 replicas, env-steps/s incl. the fork", unit: "/s", higherIsBetter: true, take: async (p, _one, two) => (await py(p, "fork_group.py", ["--endpoints", two.endpoints.join(","), "--envs", envs, "--group", "64", "--rounds", quick ? "2" : "4"])).steps_per_s! },
  ];
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const at = argv.indexOf("--baseline");
  if (at < 0 || !argv[at + 1]) throw new Error("usage: npm run bench:builds -- --baseline DIR [--quick] [--reps N]");
  const baseline = resolve(argv[at + 1]!);
  const quick = argv.includes("--quick");
  const repsAt = argv.indexOf("--reps");
  const reps = repsAt >= 0 ? Number(argv[repsAt + 1]) : quick ? 2 : 3;
  const python = benchPython(ROOT);
  const envs = libraryForBench();
  type Build = "current" | "baseline";
  const started: Record<Build, { one: Server; two: Server }> = {
    current: { one: await serve(ROOT, envs, 1), two: await serve(ROOT, envs, 2) },
    baseline: { one: await serve(baseline, envs, 1), two: await serve(baseline, envs, 2) },
  };
  const load0 = loadavg()[0]!;
  const ms = measures(quick, envs);
  const got = ms.map(() => ({ current: [] as number[], baseline: [] as number[] }));
  try {
    for (let rep = 0; rep < reps; rep++) {
      const order: Build[] = rep % 2 === 0 ? ["current", "baseline"] : ["baseline", "current"];
      for (const [i, m] of ms.entries()) {
        for (const b of order) got[i]![b].push(await m.take(python, started[b].one, started[b].two));
      }
    }
  } finally {
    for (const b of ["current", "baseline"] as const) {
      await started[b].one.stop();
      await started[b].two.stop();
    }
  }
  const rev = (dir: string) => {
    try {
      return `${dir} at ${execFileSync("git", ["-C", dir, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim()}`;
    } catch {
      return dir;
    }
  };
  const lines = [
    `# This build vs a baseline build (bench/compare-builds.ts)`,
    "",
    `current: ${rev(ROOT)}; baseline: ${rev(baseline)}; ${reps} repetitions, builds alternating; median [min–max]; load average ${load0.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end.`,
    "",
    "| figure | this build | baseline | this build is |",
    "| --- | --- | --- | --- |",
    ...ms.map((m, i) => {
      const g = got[i]!;
      const digits = m.unit === "ms" ? 2 : 0;
      return `| ${m.what} | ${spread(g.current, digits)} ${m.unit} | ${spread(g.baseline, digits)} ${m.unit} | ${versus(median(g.current), median(g.baseline), m.higherIsBetter)} |`;
    }),
  ];
  const text = lines.join("\n") + "\n";
  writeFileSync(join(ROOT, "bench", "builds.md"), text);
  process.stdout.write(text);
}

await main();
