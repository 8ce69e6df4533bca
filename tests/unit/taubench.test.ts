import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/server/bridge-server.js";
import { importTaubench } from "../../envs/taubench/import-taubench.js";
import { pythonCanonicalJson, taubenchStateHash } from "../../envs/taubench/taubench-hash.js";
import { BridgeClient } from "../../protocol/bridge-client.js";

// the data is read from the shared folder (never committed), as a user would point at their copy
const TAU = join(import.meta.dirname, "..", "..", "..", "shared", "benchmarks", "taubench");

interface Task {
  id: string;
  actions: { name: string; arguments: Record<string, unknown> }[];
  outputs: string[];
}
interface Expected {
  id: string;
  final_state_sha256: string;
  outputs: (string | null)[];
}
interface Step {
  observation: { content: string; tool_results?: { content: string; ok: boolean }[] };
  reward: number;
  terminated: boolean;
  info: { reward_info?: { checks: { passed: boolean; error?: string }[] } };
}

test("the hash serialisation matches the README's definition", () => {
  expect(pythonCanonicalJson({ b: 1, a: [3.5, 2, "é", 1e-7, 1e21, "😀"] })).toBe('{"a":[3.5,2,"\\u00e9",1e-07,1000000000000000000000,"\\ud83d\\ude00"],"b":1}');
  expect(taubenchStateHash({})).toBe("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
});

const readJson = <T>(p: string): T => JSON.parse(readFileSync(p, "utf8")) as T;

/** Compares one tool output with the original's: as JSON values where the original's is JSON, else as strings. */
function sameOutput(expected: string, ours: string): boolean {
  let mine: unknown;
  try {
    mine = JSON.parse(ours);
  } catch {
    mine = ours;
  }
  // a tool that returned a string (Python's plain-string results) is compared as that string
  if (typeof mine === "string") return mine === expected;
  try {
    return JSON.stringify(sortKeys(JSON.parse(expected))) === JSON.stringify(sortKeys(mine));
  } catch {
    return expected === mine;
  }
}
const sortKeys = (v: unknown): unknown =>
  Array.isArray(v) ? v.map(sortKeys) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])])) : v;

describe.each(["retail", "airline"] as const)("tau-bench %s through the bridge", (domain) => {
  let runtime: EnvRuntime;
  let server: BridgeServer;
  let client: BridgeClient;
  const dir = mkdtempSync(join(tmpdir(), "envscaler-tau-"));
  const tasks = new Map<string, Task>();
  for (const f of readdirSync(join(TAU, domain)).filter((f) => /^tasks_\w+\.json$/.test(f))) for (const t of readJson<Task[]>(join(TAU, domain, f))) tasks.set(t.id, t);
  const expected = readdirSync(join(TAU, domain))
    .filter((f) => f.startsWith("expected_"))
    .flatMap((f) => readJson<Expected[]>(join(TAU, domain, f)));

  beforeAll(async () => {
    importTaubench(TAU, dir, [domain]);
    runtime = await EnvRuntime.start({ envs: [dir], workers: 2 });
    server = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: pino({ level: "silent" }) });
    await server.start();
    client = new BridgeClient(server.endpoint, { timeoutMs: 120_000 });
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
    await runtime?.close();
  });

  test("the bundle imports every task as a conversation scenario scored all-or-nothing", () => {
    const scenarios = readJson<{ id: string; mode: string; reward: string; user_instructions: string }[]>(join(dir, `taubench-${domain}`, "scenarios.json"));
    expect(scenarios).toHaveLength(tasks.size);
    expect(scenarios.every((s) => s.mode === "conversation" && s.reward === "all" && s.user_instructions.length > 0)).toBe(true);
    expect(scenarios[0]!.id).toMatch(new RegExp(`^${domain}-(test|train|dev)-\\d+$`));
  });

  test(`ground-truth actions reproduce the original's tool outputs and final database hash (${expected.length} tasks), and score 1.0`, async () => {
    const mismatches: string[] = [];
    const run = async (e: Expected) => {
      const task = tasks.get(e.id)!;
      const { session_id } = (await client.request("reset", { scenario_id: e.id, seed: 0 })) as { session_id: string };
      for (const [i, a] of task.actions.entries()) {
        const r = (await client.request("step", { session_id, action: a })) as Step;
        const want = e.outputs[i];
        const got = r.observation.tool_results?.[0]?.content ?? r.observation.content;
        if (want === null || want === undefined) {
          if (r.observation.tool_results?.[0]?.ok !== false) mismatches.push(`${e.id} #${i} ${a.name}: the original has no such tool, ours ran it`);
        } else if (!sameOutput(want, got)) mismatches.push(`${e.id} #${i} ${a.name}: expected ${want.slice(0, 200)} got ${got.slice(0, 200)}`);
        if (r.terminated) break;
      }
      const { state_json } = (await client.request("state", { session_id })) as { state_json: string };
      const hash = taubenchStateHash(JSON.parse(state_json));
      if (hash !== e.final_state_sha256) mismatches.push(`${e.id}: final state hash differs`);
      // say the required outputs, then end the episode as an evaluation harness would
      if (task.outputs.length) await client.request("step", { session_id, action: `Here you go: ${task.outputs.join(", ")}` });
      const end = (await client.request("finish", { session_id }).catch(() => null)) as Step | null;
      if (end && end.reward !== 1) mismatches.push(`${e.id}: reward ${end.reward}: ${JSON.stringify(end.info.reward_info?.checks.filter((c) => !c.passed))}`);
      await client.request("close", { session_id });
    };
    // a few sessions in flight at once, as a trainer would
    const queue = [...expected];
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let e = queue.shift(); e; e = queue.shift()) await run(e);
    }));
    expect(mismatches.slice(0, 20)).toEqual([]);
  }, 900_000);

  // what CPython 3.11's eval gives for these (calculate is str(round(float(eval(e)), 2))): the
  // port's parser recurses per nesting level, so this also proves the guest stack is deep enough
  const calculations: [string, string][] = [
    [`${"(".repeat(200)}1${")".repeat(200)}`, "1.0"],
    [`${"(".repeat(201)}1${")".repeat(201)}`, "Error: too many nested parentheses (<string>, line 1)"],
    [`${"-".repeat(1000)}1`, "1.0"],
    [`${"1+".repeat(1000)}1`, "1001.0"],
    [`${"1**".repeat(1000)}1`, "1.0"],
    [`${"-".repeat(3000)}1`, "Error: maximum recursion depth exceeded during compilation"],
    ["9**9**9", "Error: int too large to convert to float"],
    ["2**-2000", "0.0"],
    ["(-8)**(1/3)", "Error: float() argument must be a string or a real number, not 'complex'"],
  ];
  test.runIf(domain === "retail")("calculate matches CPython at its nesting and size limits", async () => {
    const { session_id } = (await client.request("reset", { scenario_id: expected[0]!.id, seed: 0 })) as { session_id: string };
    const got: [string, string][] = [];
    for (const [expression] of calculations) {
      const r = (await client.request("step", { session_id, action: { name: "calculate", arguments: { expression } } })) as Step;
      got.push([expression, JSON.parse(r.observation.tool_results![0]!.content) as string]);
    }
    await client.request("close", { session_id });
    expect(got).toEqual(calculations);
  }, 120_000);

  test("doing nothing scores 0 wherever the task changes the database or requires outputs", async () => {
    const changing = expected.filter((e) => (tasks.get(e.id)!.outputs.length > 0 || tasks.get(e.id)!.actions.some((a) => !/^(get_|list_|search_|find_|calculate|think)/.test(a.name)))).slice(0, 10);
    expect(changing.length).toBeGreaterThan(0);
    for (const e of changing) {
      const { session_id } = (await client.request("reset", { scenario_id: e.id, seed: 0 })) as { session_id: string };
      const end = (await client.request("finish", { session_id })) as Step;
      expect(end.reward, e.id).toBe(0);
      await client.request("close", { session_id });
    }
  }, 300_000);
});
