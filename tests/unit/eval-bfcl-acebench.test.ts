import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import type { RolloutResults } from "../../agent/summarize.js";
import { OpenAIFixture, type FixtureRequest, type Scripted } from "../openai-fixture.js";

// `envscaler eval bfcl|acebench` end to end against the local OpenAI-compatible fixture: a scripted
// agent that writes its calls as ```json fences (one task solved from its ground truth) and
// whose other task gets a reply cut at the token cap.
const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..", "..");
const CLI = join(ROOT, "cli", "main.ts");
const ACE = resolve(ROOT, "..", "shared", "benchmarks", "acebench");
const PY = process.env.BFCL_PYTHON ?? join(ROOT, ".venv", "bin", "python");
const HAVE_BFCL = existsSync(PY) && spawnSync(PY, ["-c", "import bfcl_eval, mpmath"]).status === 0;
const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-eval-"));
const cli = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args], { maxBuffer: 1 << 24, env: { ...process.env, BFCL_PYTHON: PY } });
const readResults = (out: string) => JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as RolloutResults;

/** A call as a ```json fence; integral floats ({"$float": 30}) written as 30.0 so Python reads a float. */
function fenced(name: string, args: unknown): string {
  const text = (v: unknown): string => {
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && "$float" in v) return `${(v as { $float: number }).$float}.0`;
    if (Array.isArray(v)) return `[${v.map(text).join(", ")}]`;
    if (v && typeof v === "object") return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${text(x)}`).join(", ")}}`;
    return JSON.stringify(v);
  };
  return `I will call the tool.\n\`\`\`json\n{"name": ${JSON.stringify(name)}, "arguments": ${text(args)}}\n\`\`\``;
}
const TRUNCATED: Scripted = { content: '```json\n{"name": "cd", "argum', finish_reason: "length" };

/** Per turn (a user message starts one), the calls made since that message. */
function position(r: FixtureRequest): { turn: number; done: number; first: string } {
  const users = r.messages.map((m, i) => [m, i] as const).filter(([m]) => m.role === "user" && !/^<tool_response>/.test(m.content ?? ""));
  const last = users[users.length - 1]![1];
  const done = r.messages.slice(last + 1).filter((m) => m.role === "assistant").length;
  return { turn: users.length - 1, done, first: users[0]![0].content };
}

test.skipIf(!HAVE_BFCL)(`envscaler eval bfcl: BFCL's turns, the official per-turn checker, accuracy per category, the data version named (${HAVE_BFCL ? "bfcl-eval found" : `bfcl-eval not importable with ${PY}; run scripts/test-all.sh or set BFCL_PYTHON`})`, async () => {
  // multi_turn_base_1's ground truth (bfcl-eval 2026.3.23), replayed one fenced call per reply
  const solution: [string, Record<string, unknown>][][] = [
    [["ls", { a: true }]],
    [["cd", { folder: "workspace" }], ["mv", { source: "log.txt", destination: "archive" }]],
    [["cd", { folder: "archive" }], ["grep", { file_name: "log.txt", pattern: "Error" }]],
    [["tail", { file_name: "log.txt", lines: 20 }]],
  ];
  const fixture = await OpenAIFixture.start((r) => {
    const p = position(r);
    if (/I am alex\. Check if the current directory is under my name/.test(p.first)) {
      const next = solution[p.turn]?.[p.done];
      return next ? fenced(next[0], next[1]) : "Done.";
    }
    return p.done === 0 ? TRUNCATED : "Sorry.";
  });
  const out = tmp();
  try {
    const { stdout } = await cli(["eval", "bfcl", "--domain", "base", "--limit", "2", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--out", out]);
    expect(stdout).toMatch(/2\/2 episodes/);
    expect(stdout).toContain("accuracy per category: base 0.500 (1/2)");
    const r = readResults(out);
    expect(r.settings.benchmark).toMatchObject({ name: "bfcl", split: "base (first 2 tasks per domain only)" });
    expect(r.settings.benchmark!.data_version).toBe("bfcl-eval 2026.3.23, data sha256 base 1a21a995d06fd6f2/1fee67823b317571");
    expect(r.episodes.map((e) => [e.scenario_id, e.reward])).toEqual([["multi_turn_base_0", 0], ["multi_turn_base_1", 1]]);
    const cats = JSON.parse(readFileSync(join(out, "categories.json"), "utf8")) as { categories: Record<string, { accuracy: number }> };
    expect(cats.categories).toEqual({ base: { episodes: 2, passed: 1, accuracy: 0.5 } });
    // the fenced call ran and its output came back as bfcl-eval renders it
    const afterLs = fixture.requests.find((q) => q.messages.some((m) => (m.role === "tool" || m.role === "user") && /"current_directory_content"/.test(m.content ?? "")));
    expect(afterLs).toBeDefined();
  } finally {
    await fixture.close();
  }
}, 300_000);

test.skipIf(!existsSync(join(ACE, "data")))(`envscaler eval acebench: multi-step tasks scored by ACEBench's end-to-end check, accuracy per category (${existsSync(ACE) ? ACE : `no ${ACE}: point it at ../shared/benchmarks/acebench`})`, async () => {
  const solution: [string, Record<string, unknown>][] = [
    ["login_food_platform", { username: "Eve", password: "password123" }],
    ["add_food_delivery_order", { username: "Eve", merchant_name: "Domino's", items: [{ product: "Super Supreme Pizza", quantity: 1 }] }],
    ["add_reminder", { title: "Today's Spending", description: "Today's spending 88.0 yuan", time: "2024-07-15 09:30" }],
  ];
  const fixture = await OpenAIFixture.start((r) => {
    const p = position(r);
    if (/Super Supreme Pizza/.test(p.first) && !/Wi-Fi/i.test(p.first)) {
      const next = solution[p.done];
      return next ? fenced(next[0], next[1]) : "finish conversation";
    }
    return TRUNCATED;
  });
  const out = tmp();
  try {
    const { stdout, stderr } = await cli(["eval", "acebench", "--from", ACE, "--domain", "multi_step", "--limit", "2", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--out", out]);
    // multi-step tasks need no simulated user, so no warning
    expect(stderr).not.toContain("no simulated user");
    // end-to-end accuracy, and ACEBench's process accuracy (1 for a passed task; the truncated one made no call: 0)
    expect(stdout).toContain("accuracy per category: multi_step 0.500 (1/2), process 0.500");
    const cats = JSON.parse(readFileSync(join(out, "categories.json"), "utf8")) as { categories: Record<string, unknown> };
    expect(cats.categories).toEqual({ multi_step: { episodes: 2, passed: 1, accuracy: 0.5, process_accuracy: 0.5 } });
    // the report page shows the same official figures, and the protocol's real end rule
    const page = readFileSync(join(out, "report.html"), "utf8");
    expect(page).toMatch(/<table id="per-category">.*<th class="n">process accuracy<\/th>.*<tr><td>multi_step<\/td><td class="n">1\/2<\/td><td class="n">0\.500<\/td><td class="n">0\.500<\/td><\/tr>/s);
    expect(page).not.toContain("NOT COMPARABLE");
    const r = readResults(out);
    expect(r.settings.benchmark!.protocol).toContain('until a reply containing "finish conversation"');
    expect(r.settings.benchmark!.not_comparable).toBeUndefined();
    expect(r.settings.benchmark).toMatchObject({ name: "acebench", split: "multi_step (first 2 tasks per domain only)" });
    expect(r.settings.benchmark!.data_version).toMatch(/^ACEBench e6db74b \(English agent data\), data sha256 [0-9a-f]{16}$/);
    expect(r.episodes.map((e) => [e.scenario_id, e.reward])).toEqual([["agent_multi_step_0", 1], ["agent_multi_step_1", 0]]);
    // the order went through: the tool output the original renders for it reached the agent
    expect(fixture.requests.some((q) => q.messages.some((m) => /Total amount: 88\.0 yuan/.test(m.content ?? "")))).toBe(true);
  } finally {
    await fixture.close();
  }
}, 300_000);

test.skipIf(!existsSync(join(ACE, "reference")))("envscaler eval acebench: a multi-turn conversation with a simulated user that follows ACEBench's own user prompt, scored by the end-to-end check", async () => {
  // agent_multi_turn_0's milestone calls (the inbox is full: the oldest message goes first)
  const solution: [string, Record<string, unknown>][] = [
    ["turn_on_wifi", {}],
    ["get_earliest_message_id", {}],
    ["delete_message", { message_id: 3 }],
    ["send_message", { sender_name: "Grace", receiver_name: "Frank", message: "Are you free tomorrow to have lunch with me?" }],
  ];
  const fixture = await OpenAIFixture.start((r) => {
    if (r.model === "user-sim") return r.messages.some((m) => m.role === "assistant") ? "# Thought:\ndone\n# Reply:\n###STOP###" : "# Thought:\nstart\n# Reply:\nI am Grace, please send Frank: 'Are you free tomorrow to have lunch with me?'";
    const calls = r.messages.filter((m) => m.role === "assistant").length;
    const next = solution[calls];
    return next ? fenced(next[0], next[1]) : "The message was sent.";
  });
  const out = tmp();
  try {
    const { stdout, stderr } = await cli(["eval", "acebench", "--from", ACE, "--domain", "multi_turn", "--limit", "1", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--user-model", "user-sim", "--user-base-url", fixture.baseURL, "--max-steps", "12", "--out", out]);
    expect(stdout).toContain("accuracy per category: multi_turn 1.000 (1/1), process 1.000");
    const r = readResults(out);
    // the simulated user's temperature is part of the settings; a step cap of our own makes the score not comparable
    expect(r.settings.user).toMatchObject({ model: "user-sim", temperature: 0.7 });
    expect(stderr).toMatch(/--max-steps 12 caps every episode, unlike the benchmark's protocol .*not comparable/);
    const cats = JSON.parse(readFileSync(join(out, "categories.json"), "utf8")) as { benchmark: { not_comparable?: string[] } };
    expect(cats.benchmark.not_comparable).toEqual([expect.stringMatching(/^--max-steps 12 caps every episode/)]);
    const page = readFileSync(join(out, "report.html"), "utf8");
    expect(page).toMatch(/<dt>NOT COMPARABLE<\/dt><dd>--max-steps 12 caps every episode/);
    expect(page).toContain("user-sim @ " + fixture.baseURL + " · temperature 0.7");
    expect(r.episodes.map((e) => [e.scenario_id, e.reward, e.end_reason])).toEqual([["agent_multi_turn_0", 1, "user_stop"]]);
    const userSystem = fixture.requests.find((q) => q.model === "user-sim")!.messages[0]!.content;
    expect(userSystem).toContain("You are a user interacting with an agent.");
    expect(userSystem).toContain("Instruction: Your name is Grace.");
    expect(userSystem).not.toContain("finish conversation");
  } finally {
    await fixture.close();
  }
}, 300_000);
