import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { episodePage } from "../../bridge/tools/record/episode-page.js";
import { selectForSft } from "../../bridge/tools/record/sft-export.js";
import { readTrajectories } from "../../bridge/tools/record/trajectory-reader.js";
import { encodeRecord } from "../../bridge/tools/record/trajectory-writer.js";
import { provenanceOf } from "../../bridge/fronts/ui/env-catalog.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import type { EnvBundle } from "../../envs/format/load-bundle.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";
import { HOSTILE, makeSynthRun, NOTES_REF, recordEpisodes } from "../ui-fixtures.js";

let ui: UiServer;
let dir: string;

type Json = Record<string, any>;
async function call(path: string, body?: unknown, init: RequestInit = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(new URL(path, ui.url), body === undefined ? init : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), ...init });
  return { status: res.status, body: (await res.json()) as Json };
}
const post = async (path: string, body: unknown) => {
  const r = await call(path, body);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "envscaler-ui-"));
  await recordEpisodes(join(dir, "traj", "run1", "t.jsonl"));
  const synthEnvs = makeSynthRun(join(dir, "run"));
  ui = await UiServer.start({ envs: [synthEnvs, HOSTILE, BUNDLED_ENVS], trajectories: join(dir, "traj"), port: 0, hardStopGraceMs: 300 });
});

afterAll(async () => {
  await ui?.close();
});

describe("envs", () => {
  test("imported BFCL and ACEBench bundles are labelled imported, an unknown folder neutrally (not hand-written)", () => {
    const at = (id: string) => provenanceOf({ id, dir: join(dir, id) } as EnvBundle);
    expect(at("bfcl-base-gorilla-v1")).toEqual({ kind: "import", from: expect.stringMatching(/^BFCL .*envscaler import bfcl/) });
    expect(at("acebench-multi-step-phone-v1")).toEqual({ kind: "import", from: expect.stringMatching(/^ACEBench.*envscaler import acebench/) });
    expect(at("mine-v1")).toEqual({ kind: "local" });
  });

  test("every env with its tools, state schema, scenarios and provenance; search narrows the list", async () => {
    const { body: all } = await call("/api/envs");
    const ids = all.envs.map((e: Json) => e.id);
    expect(ids).toEqual(expect.arrayContaining(["notes-v1", "hostile-v1", "library-v1"]));
    const prov = Object.fromEntries(all.envs.map((e: Json) => [e.id, e.provenance.kind]));
    expect(prov).toMatchObject({ "notes-v1": "synth", "hostile-v1": "local", "library-v1": "bundled" });

    expect((await call("/api/envs?q=circulation")).body.envs.map((e: Json) => e.id)).toEqual(["library-v1"]);
    // words match tool names and scenario tasks too, all of them
    expect((await call("/api/envs?q=delete_note%20groceries")).body.envs.map((e: Json) => e.id)).toEqual(["notes-v1"]);
    expect((await call("/api/envs?q=zzzz-nothing")).body.envs).toEqual([]);

    const { body: lib } = await call("/api/env?id=library-v1");
    expect(lib.tools.length).toBeGreaterThan(10);
    expect(lib.state_schema.required).toContain("books");
    expect(lib.rules.length).toBeGreaterThan(3);
    expect(lib.scenarios[0]).toMatchObject({ id: expect.any(String), task: expect.any(String), mode: expect.any(String), checks: expect.any(Array) });
    expect(lib.synth).toBeNull();
  });

  test("a synth env carries its run's dual-agent evidence and rejections", async () => {
    const { body: notes } = await call("/api/env?id=notes-v1");
    expect(notes.provenance).toMatchObject({ kind: "synth", run: join(dir, "run") });
    expect(notes.synth).toMatchObject({ topic: "personal notes", pass_rate: 1, kept: true, scenarios_kept: ["notes-1", "notes-2"] });
    expect(notes.synth.cases.map((c: Json) => c.result)).toEqual(["pass", "warning"]);
    expect(notes.synth.rejected).toEqual([{ stage: "scenarios", item: "notes-v1 scenario 3", reason: "the reference solution scores 0.5" }]);
    expect(notes.synth.run_rejected.map((r: Json) => r.item)).toEqual(["Translate this poem", "fax-v1"]);
    expect(notes.scenarios.find((s: Json) => s.id === "notes-1").reference_actions).toEqual(NOTES_REF);
  });

  test("an unknown env is a typed 404", async () => {
    expect(await call("/api/env?id=nope-v1")).toEqual({ status: 404, body: { error: { code: "unknown_env", message: "no env nope-v1" } } });
  });
});

describe("play", () => {
  test("start, tool calls (structured and raw text) with diffs, checks scored live on a fork, finish with the reward", async () => {
    const s = await post("/api/play/start", { page: "p1", scenario_id: "notes-1", seed: 5 });
    expect(s.info).toMatchObject({ scenario_id: "notes-1", seed: 5, mode: "task" });
    expect(s.state.notes.n1).toMatchObject({ title: "groceries" });
    expect(s.live_scoring).toBe(true);
    expect(s.score.how).toBe("copy");
    expect(s.score.reward_info.checks.map((c: Json) => c.passed)).toEqual([false, false, false]);

    const a = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] });
    expect(a.result.info.diff).toEqual(expect.arrayContaining([expect.objectContaining({ op: "add", path: expect.stringMatching(/^\/notes\//) })]));
    expect(Object.values(a.state.notes).some((n: any) => n.title === "todo")).toBe(true);
    expect(a.score.reward_info.checks.map((c: Json) => c.passed)).toEqual([true, false, false]);

    // the model's raw text, as Qwen3/Hermes write it
    const b = await post("/api/play/step", { episode_id: s.episode_id, action: '<think>now the old one</think><tool_call>{"name": "delete_note", "arguments": {"note_id": "n1"}}</tool_call>' });
    expect(b.result.info.tool_calls[0]).toMatchObject({ name: "delete_note" });
    expect(b.result.info.diff).toEqual([expect.objectContaining({ op: "remove", path: "/notes/n1" })]);
    expect(b.score).toMatchObject({ reward: 1, how: "copy" });

    // scoring copies are closed: only the played episode is open
    expect((await call("/api/info")).body.open_episodes).toBe(1);
    // live scoring did not end the episode
    const f = await post("/api/play/finish", { episode_id: s.episode_id });
    expect(f.result).toMatchObject({ reward: 1, terminated: true, info: { end_reason: "client" } });
    expect(f.score).toMatchObject({ reward: 1, how: "final" });
    expect(await call("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] })).toMatchObject({ status: 409, body: { error: { code: "episode_done" } } });
    await post("/api/play/close", { episode_id: s.episode_id });
    expect((await call("/api/info")).body.open_episodes).toBe(0);
  });

  test("bad input: the typed error, and the app stays usable", async () => {
    expect(await call("/api/play/start", { page: "p1", scenario_id: "no-such-scenario" })).toEqual({ status: 404, body: { error: { code: "unknown_scenario", message: "no scenario no-such-scenario" } } });
    expect((await call("/api/play/start", { page: "p1", scenario_id: "notes-1", seed: -1 })).body.error.code).toBe("bad_request");
    expect((await call("/api/play/start", { page: "p1", scenario_id: "notes-1", seed: 2 ** 32 })).body.error.code).toBe("bad_request");
    // the protocol's seed range: the largest seed a Python client can send works here too
    expect((await post("/api/play/start", { page: "p9", scenario_id: "notes-1", seed: 2 ** 32 - 1 })).info).toMatchObject({ seed: 2 ** 32 - 1 });
    expect((await call("/api/play/start", { page: "p1" })).body.error).toEqual({ code: "bad_request", message: "scenario_id must be a non-empty string" });
    expect(await call("/api/play/step", { episode_id: "nope", action: "hi" })).toMatchObject({ status: 404, body: { error: { code: "unknown_episode" } } });
    const notJson = await call("/api/play/start", undefined, { method: "POST", headers: { "content-type": "application/json" }, body: "{oops" });
    expect(notJson).toMatchObject({ status: 400, body: { error: { code: "bad_request" } } });
    const form = await call("/api/play/start", undefined, { method: "POST", headers: { "content-type": "text/plain" }, body: "{}" });
    expect(form.status).toBe(415);
    expect((await call("/api/nowhere")).status).toBe(404);

    // invalid arguments are the agent's mistake: an observation, and the episode goes on
    const s = await post("/api/play/start", { page: "p1", scenario_id: "notes-1", seed: 1 });
    expect(await call("/api/play/step", { episode_id: s.episode_id })).toMatchObject({ status: 400, body: { error: { code: "bad_request" } } });
    const bad = await post("/api/play/step", { episode_id: s.episode_id, action: { name: "delete_note", arguments: { note_id: 7 } } });
    expect(JSON.parse(bad.result.observation.content).error.type).toBe("invalid_arguments");
    expect(bad.result.terminated).toBe(false);
    const unknownTool = await post("/api/play/step", { episode_id: s.episode_id, action: { name: "launch_rockets", arguments: {} } });
    expect(unknownTool.result.observation.content).toMatch(/launch_rockets/);
    const ok = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[1] });
    expect(ok.result.info.diff).toHaveLength(1);
    await post("/api/play/close", { episode_id: s.episode_id });
  });

  test.each([
    ["spin", "a loop the sandbox's deadline interrupts"],
    ["native_hang", "a builtin that never polls the interrupt: the fuel checks stop it at the deadline"],
  ])("a hostile env (%s, %s) ends its own episode with env_timeout; the app stays usable", async (tool) => {
    const h = await post("/api/play/start", { page: "p2", scenario_id: "hostile-1", seed: 1 });
    const r = await post("/api/play/step", { episode_id: h.episode_id, action: { name: tool, arguments: {} } });
    expect(r.result).toMatchObject({ terminated: true, info: { end_reason: "env_fault", error: { code: "env_timeout" } } });
    expect(r.score).toMatchObject({ reward: 0, how: "final" });
    expect(await call("/api/play/step", { episode_id: h.episode_id, action: { name: "ping", arguments: {} } })).toMatchObject({ status: 409, body: { error: { code: "episode_done" } } });
    // another episode of the same env and one of another env work
    const again = await post("/api/play/start", { page: "p2", scenario_id: "hostile-1", seed: 1 });
    expect((await post("/api/play/step", { episode_id: again.episode_id, action: { name: "ping", arguments: {} } })).result.observation.content).toBe('"pong"');
    const n = await post("/api/play/start", { page: "p2", scenario_id: "notes-1", seed: 2 });
    expect((await post("/api/play/step", { episode_id: n.episode_id, action: NOTES_REF[1] })).score.reward_info.checks[1].passed).toBe(true);
    expect((await post("/api/play/close-page", { page: "p2" })).closed).toBe(3);
  });

  test("a page's episodes close when it goes away, and idle ones are closed", async () => {
    const a = await post("/api/play/start", { page: "gone", scenario_id: "notes-1", seed: 1 });
    await post("/api/play/start", { page: "gone", scenario_id: "notes-1", seed: 2 });
    const other = await post("/api/play/start", { page: "stays", scenario_id: "notes-1", seed: 3 });
    expect((await post("/api/play/close-page", { page: "gone" })).closed).toBe(2);
    expect((await call("/api/play/step", { episode_id: a.episode_id, action: NOTES_REF[1] })).body.error.code).toBe("unknown_episode");
    expect((await call(`/api/play/state?episode_id=${other.episode_id}`)).body.state.notes.n1).toBeDefined();
    await post("/api/play/close", { episode_id: other.episode_id });

    const idle = await UiServer.start({ envs: [FIXTURES], trajectories: join(dir, "none"), port: 0, idleMs: 300 });
    try {
      const e = (await (await fetch(new URL("/api/play/start", idle.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ page: "p", scenario_id: "notes-1", seed: 1 }) })).json()) as Json;
      expect(e.episode_id).toEqual(expect.any(String));
      // nobody touches it: the sweeper closes it
      for (let i = 0; i < 100 && idle.play.count() > 0; i++) await new Promise((r) => setTimeout(r, 100));
      const res = await fetch(new URL(`/api/play/state?episode_id=${e.episode_id}`, idle.url));
      expect(((await res.json()) as Json).error.code).toBe("unknown_episode");
      expect(idle.runtime.stats().episodes).toBe(0);
    } finally {
      await idle.close();
    }
  });
});

describe("trajectories", () => {
  test("listed with filters; one episode as data and as the page `envscaler view` writes", async () => {
    const { body } = await call("/api/trajectories");
    expect(body.episodes.map((e: Json) => [e.episode_id, e.file, e.reward, e.end_reason ?? e.how])).toEqual([
      ["ep-solved", join("run1", "t.jsonl"), 1, "text_reply"],
      ["ep-finished", join("run1", "t.jsonl"), expect.any(Number), "client"],
      ["ep-open", join("run1", "t.jsonl"), null, "open"],
    ]);
    const q = async (s: string) => (await call(`/api/trajectories?${s}`)).body.episodes.map((e: Json) => e.episode_id);
    expect(await q("min_reward=1")).toEqual(["ep-solved"]);
    expect(await q("end_reason=client")).toEqual(["ep-finished"]);
    expect(await q("env=notes-v1&scenario=notes-1")).toHaveLength(3);
    expect(await q("env=library-v1")).toEqual([]);
    expect((await call("/api/trajectories?min_reward=abc")).body.error.code).toBe("bad_request");

    const file = join("run1", "t.jsonl");
    const ep = (await call(`/api/trajectories/episode?file=${encodeURIComponent(file)}&id=ep-solved`)).body;
    expect(ep.steps).toHaveLength(3);
    const page = await fetch(new URL(`/trajectories/page?file=${encodeURIComponent(file)}&id=ep-solved`, ui.url));
    expect(page.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
    expect(await page.text()).toBe(episodePage(readTrajectories(join(dir, "traj", file)).episodes[0]!));
    expect((await call(`/api/trajectories/episode?file=${encodeURIComponent(file)}&id=nope`)).body.error.code).toBe("unknown_episode");
    // names are relative to the trajectories folder and stay inside it
    expect((await call(`/api/trajectories/episode?file=${encodeURIComponent("../../etc/passwd.jsonl")}&id=x`)).body.error.code).toBe("bad_request");
  });

  test("damaged lines are skipped with their file, line and reason; the rest is listed", async () => {
    const text = readFileSync(join(dir, "traj", "run1", "t.jsonl"), "utf8");
    writeFileSync(join(dir, "traj", "run1", "torn.jsonl"), text + text.split("\n")[1]!.slice(0, 40));
    try {
      const { body } = await call("/api/trajectories");
      expect(body.skipped).toEqual([{ file: join("run1", "torn.jsonl"), line: text.split("\n").length, reason: expect.stringMatching(/torn tail/) }]);
      expect(body.episodes.filter((e: Json) => e.file === join("run1", "torn.jsonl"))).toHaveLength(3);
    } finally {
      rmSync(join(dir, "traj", "run1", "torn.jsonl"));
    }
  });

  test("replay verifies an episode and points at the first divergence", async () => {
    const file = join("run1", "t.jsonl");
    expect(await post("/api/trajectories/replay", { file, episode_id: "ep-solved" })).toMatchObject({ ok: true, steps: 3 });
    // a recording whose step-2 observation says something else (re-checksummed, so it reads fine)
    const lines = readFileSync(join(dir, "traj", file), "utf8").trim().split("\n");
    const tampered = lines.map((l) => {
      const r = JSON.parse(l.slice(9));
      if (r.t === "step" && r.episode_id === "ep-solved" && r.step === 2) r.observation.content = '{"success":false}';
      return encodeRecord(r);
    });
    writeFileSync(join(dir, "traj", "tampered.jsonl"), tampered.join(""));
    const r = await post("/api/trajectories/replay", { file: "tampered.jsonl", episode_id: "ep-solved" });
    expect(r).toMatchObject({ ok: false, divergence: { step: 2, what: "observation" } });
    expect(r.divergence.expected).toMatch(/false/);
  });

  test("the selected episodes export as SFT records; episodes that did not end are left out", async () => {
    const file = join("run1", "t.jsonl");
    const r = await post("/api/trajectories/export", { items: ["ep-solved", "ep-open"].map((episode_id) => ({ file, episode_id })) });
    const records = r.jsonl.trim().split("\n").map((l: string) => JSON.parse(l));
    const eps = readTrajectories(join(dir, "traj", file)).episodes;
    expect(records).toEqual(selectForSft([eps[0]!], {}));
    expect(r).toMatchObject({ count: 1, left_out: ["ep-open"], left_out_why: [{ episode_id: "ep-open", why: "did not end" }] });
    expect((await call("/api/trajectories/export", { items: [] })).body.error.code).toBe("bad_request");
  });
});

describe("security", () => {
  test("loopback: requests addressed to another host name (DNS rebinding) and cross-origin posts are refused", async () => {
    // fetch will not send another Host header; node:http will
    const { port } = new URL(ui.url);
    const status = await new Promise<number>((resolve, reject) => {
      request({ host: "127.0.0.1", port, path: "/api/info", headers: { host: `attacker.example:${port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      }).on("error", reject).end();
    });
    expect(status).toBe(403);
    expect((await call("/api/info")).status).toBe(200);
    const cross = await call("/api/play/start", undefined, { method: "POST", headers: { "content-type": "application/json", origin: "http://attacker.example" }, body: JSON.stringify({ page: "x", scenario_id: "notes-1" }) });
    expect(cross).toMatchObject({ status: 403, body: { error: { code: "forbidden" } } });
    expect(ui.token).toBeNull();
  });

  test("bound beyond loopback: every request needs the random token (bearer, or the cookie the link trades it for)", async () => {
    const open = await UiServer.start({ envs: [FIXTURES], trajectories: join(dir, "none"), port: 0, host: "0.0.0.0" });
    try {
      expect(open.token).toMatch(/^[\w-]{32}$/);
      const base = open.url;
      for (const path of ["/", "/api/info", "/api/envs", "/assets/app.js"]) {
        const res = await fetch(new URL(path, base));
        expect(res.status, path).toBe(401);
      }
      expect((await fetch(new URL("/api/info", base), { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
      expect((await fetch(new URL("/api/info", base), { headers: { authorization: `Bearer ${open.token}` } })).status).toBe(200);
      const link = await fetch(open.openUrl, { redirect: "manual" });
      expect(link.status).toBe(303);
      const cookie = link.headers.get("set-cookie")!;
      expect(cookie).toMatch(/HttpOnly; SameSite=Strict/);
      const withCookie = await fetch(new URL("/api/envs", base), { headers: { cookie: cookie.split(";")[0]! } });
      expect(withCookie.status).toBe(200);
    } finally {
      await open.close();
    }
  });
});

describe("conversation scenarios with a simulated user", () => {
  test("talk as the agent; checks are scored live on a fork, and finally when the user stops", async () => {
    const user = await OpenAIFixture.start(["# Reply:\nHi, how many notes do I have? I'm u3.", "# Reply:\nThanks! ###STOP###"]);
    const conv = await UiServer.start({ envs: [FIXTURES], trajectories: join(dir, "none"), port: 0, user: { baseURL: user.baseURL, apiKey: "x", model: "m", maxRetries: 0 } });
    const prev = ui;
    ui = conv;
    try {
      const s = await post("/api/play/start", { page: "c", scenario_id: "notes-2", seed: 1 });
      expect(s.observation.content).toBe("Hi, how many notes do I have? I'm u3.");
      expect(s).toMatchObject({ live_scoring: true, score: { how: "copy", reward: 0 } });
      expect(await post("/api/play/score", { episode_id: s.episode_id })).toMatchObject({ how: "copy", reward: 0 });
      await post("/api/play/step", { episode_id: s.episode_id, action: { name: "add_note", arguments: { user_id: "u3", title: "x", body: "y" } } });
      const end = await post("/api/play/step", { episode_id: s.episode_id, action: "You have 1 note; I added 'x'." });
      expect(end.result).toMatchObject({ terminated: true, info: { end_reason: "user_stop" } });
      expect(end.score).toMatchObject({ reward: 1, how: "final" });
      expect(user.requests).toHaveLength(2);
    } finally {
      ui = prev;
      await conv.close();
      await user.close();
    }
  });
});

test("`envscaler ui` takes a synth run folder for --envs and the agent form's defaults and snapshot limit, prints the URL as a JSON line, and stops on SIGTERM", async () => {
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  const child = spawn(process.execPath, ["--import", "tsx", cli, "ui", "--envs", join(dir, "run"), "--trajectories", join(dir, "traj"), "--port", "0", "--max-snapshots", "3", "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-model", "m1"], { stdio: ["ignore", "pipe", "pipe"] });
  try {
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    for (let i = 0; i < 300 && !out.includes("\n"); i++) await new Promise((r) => setTimeout(r, 100));
    const url = (JSON.parse(out.split("\n")[0]!) as { ui: string }).ui;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const envs = (await (await fetch(new URL("/api/envs", url))).json()) as Json;
    expect(envs.envs.map((e: Json) => [e.id, e.provenance.kind])).toEqual([["notes-v1", "synth"]]);
    const info = (await (await fetch(new URL("/api/info", url))).json()) as Json;
    expect(info).toMatchObject({ agent: { base_url: "http://127.0.0.1:9/v1", model: "m1", running: 0 }, snapshots: { per_episode: 3, mb: 1024 } }); // --max-snapshot-mb: the default every command shares (cli/option-groups.ts)
  } finally {
    child.kill("SIGTERM");
  }
  const [code] = await once(child, "exit");
  expect(code).toBe(0);
});
