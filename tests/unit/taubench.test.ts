import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { importTaubench } from "../../envs/taubench/import-taubench.js";
import { pythonCanonicalJson, taubenchStateHash } from "../../envs/taubench/taubench-hash.js";
import { BridgeClient } from "../../agent/bridge-client.js";
import { haveShared, needsShared, sharedPath } from "../shared-data.js";

// the data is read from the shared folder (never committed), as a user would point at their copy
const TAU = sharedPath("benchmarks", "taubench");

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
  // where Python and JavaScript differ: repr switches to the exponent form below 1e-4 (JS: 1e-6),
  // ensure_ascii escapes DEL, and str keys sort by code point (an astral key after U+FF01)
  expect(pythonCanonicalJson([0.00001, 0.0001, -0.000012, "\u007f"])).toBe('[1e-05,0.0001,-1.2e-05,"\\u007f"]');
  expect(pythonCanonicalJson({ "😀": 1, "\uff01": 2, a: 3 })).toBe('{"a":3,"\\uff01":2,"\\ud83d\\ude00":1}');
});

const readJson = <T>(p: string): T => JSON.parse(readFileSync(p, "utf8")) as T;

/** Where the texts first differ, for a readable failure. */
function firstDifference(want: string, got: string): string {
  let i = 0;
  while (i < want.length && want[i] === got[i]) i++;
  return `at ${i}: expected …${JSON.stringify(want.slice(Math.max(0, i - 40), i + 60))} got …${JSON.stringify(got.slice(Math.max(0, i - 40), i + 60))}`;
}

const python = (() => {
  try {
    execFileSync("python3", ["-c", "import json"]);
    return true;
  } catch {
    return false;
  }
})();

/**
 * The oracle for texts the expected files do not cover: CPython's own json module. tau-bench's
 * get_*_details tools return json.dumps(data[table][id]) on the freshly loaded database, so this
 * prints exactly that for each requested id (dict order from the file, 46.0 as 46.0, ensure_ascii).
 */
function pythonDumps(dataFile: string, ids: string[]): string[] {
  const script = "import json,sys\nreq=json.load(sys.stdin)\ndata=json.load(open(req['file']))\nprint(json.dumps([json.dumps(data[i]) for i in req['ids']]))";
  return JSON.parse(execFileSync("python3", ["-c", script], { input: JSON.stringify({ file: dataFile, ids }), encoding: "utf8", maxBuffer: 64 << 20 })) as string[];
}

const HAVE_DATA = haveShared(join(TAU, "retail"), join(TAU, "airline"));

describe.skipIf(!HAVE_DATA).each(["retail", "airline"] as const)(`tau-bench %s through the bridge (${needsShared(TAU)})`, (domain) => {
  let runtime: EnvRuntime;
  let server: BridgeServer;
  let client: BridgeClient;
  const dir = mkdtempSync(join(tmpdir(), "envscaler-tau-"));
  const tasks = new Map<string, Task>();
  const files = HAVE_DATA ? readdirSync(join(TAU, domain)) : [];
  for (const f of files.filter((f) => /^tasks_\w+\.json$/.test(f))) for (const t of readJson<Task[]>(join(TAU, domain, f))) tasks.set(t.id, t);
  const expected = files
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

  test(`ground-truth actions reproduce the original's tool output text byte for byte and its final database hash (${expected.length} tasks), and score 1.0`, async () => {
    const mismatches: string[] = [];
    const run = async (e: Expected) => {
      const task = tasks.get(e.id)!;
      const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: e.id, seed: 0 });
      for (const [i, a] of task.actions.entries()) {
        const r = await client.request<Step>("step", { session_id, action: a });
        const want = e.outputs[i];
        const got = r.observation.tool_results?.[0]?.content ?? r.observation.content;
        if (want === null || want === undefined) {
          if (r.observation.tool_results?.[0]?.ok !== false) mismatches.push(`${e.id} #${i} ${a.name}: the original has no such tool, ours ran it`);
        } else if (got !== want) mismatches.push(`${e.id} #${i} ${a.name}: the text differs ${firstDifference(want, got)}`);
        if (r.terminated) break;
      }
      const { state_json } = await client.request<{ state_json: string }>("state", { session_id });
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
    const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: expected[0]!.id, seed: 0 });
    const got: [string, string][] = [];
    for (const [expression] of calculations) {
      const r = await client.request<Step>("step", { session_id, action: { name: "calculate", arguments: { expression } } });
      got.push([expression, r.observation.tool_results![0]!.content]);
    }
    await client.request("close", { session_id });
    expect(got).toEqual(calculations);
  }, 120_000);

  test("doing nothing scores 0 wherever the task changes the database or requires outputs", async () => {
    const changing = expected.filter((e) => (tasks.get(e.id)!.outputs.length > 0 || tasks.get(e.id)!.actions.some((a) => !/^(get_|list_|search_|find_|calculate|think)/.test(a.name)))).slice(0, 10);
    expect(changing.length).toBeGreaterThan(0);
    for (const e of changing) {
      const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: e.id, seed: 0 });
      const end = await client.request<Step>("finish", { session_id });
      expect(end.reward, e.id).toBe(0);
      await client.request("close", { session_id });
    }
  }, 300_000);

  // the expected files never show a product's variants or most records whole; this compares every
  // product (variant ids are integer-like keys written out of ascending order) and a sample of the
  // other records with what CPython's json.dumps prints for them (see pythonDumps)
  const lookups = domain === "retail"
    ? [{ tool: "get_product_details", arg: "product_id", table: "products", every: 1 }, { tool: "get_user_details", arg: "user_id", table: "users", every: 10 }, { tool: "get_order_details", arg: "order_id", table: "orders", every: 10 }]
    : [{ tool: "get_user_details", arg: "user_id", table: "users", every: 10 }, { tool: "get_reservation_details", arg: "reservation_id", table: "reservations", every: 10 }];
  test.skipIf(!python).each(lookups)("$tool shows every record as CPython's json.dumps does (oracle: python3 json on the data file)", async ({ tool, arg, table, every }) => {
    const file = join(TAU, domain, "data", `${table}.json`);
    const ids = Object.keys(JSON.parse(readFileSync(file, "utf8")) as object).filter((_, i) => i % every === 0);
    const want = pythonDumps(file, ids);
    const mismatches: string[] = [];
    // a fresh episode every 25 calls: episodes are capped at max_steps
    for (let start = 0; start < ids.length; start += 25) {
      const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: expected[0]!.id, seed: 0 });
      for (let i = start; i < Math.min(ids.length, start + 25); i++) {
        const r = await client.request<Step>("step", { session_id, action: { name: tool, arguments: { [arg]: ids[i] } } });
        const got = r.observation.tool_results?.[0]?.content ?? r.observation.content;
        if (got !== want[i]) mismatches.push(`${tool}(${ids[i]}): ${firstDifference(want[i]!, got)}`);
      }
      await client.request("close", { session_id });
    }
    expect(ids.length).toBeGreaterThan(0);
    expect(mismatches.slice(0, 10)).toEqual([]);
  }, 300_000);
});
