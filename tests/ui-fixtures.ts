// Fixtures for the UI's tests: recorded trajectories and a synth run folder, made at test time.
import { cpSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EnvRuntime } from "../bridge/core/engine/env-runtime.js";
import { TrajectoryWriter } from "../bridge/tools/record/trajectory-writer.js";
import { FIXTURES } from "./helpers.js";

export const HOSTILE = join(FIXTURES, "..", "hostile");
export const NOTES_REF = [
  { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } },
  { name: "delete_note", arguments: { note_id: "n1" } },
];

/** notes-1 solved (ends with text), notes-1 half done and finished by the client, notes-1 left open. */
export async function recordEpisodes(file: string): Promise<void> {
  const writer = new TrajectoryWriter(file);
  const rt = await EnvRuntime.start({ envs: [FIXTURES], recorder: writer });
  try {
    const a = await rt.reset("notes-1", 11, "ep-solved");
    for (const act of NOTES_REF) await rt.step(a.episode_id, act);
    await rt.step(a.episode_id, "Task Completed: added and deleted.");
    const b = await rt.reset("notes-1", 12, "ep-finished");
    await rt.step(b.episode_id, NOTES_REF[0]);
    await rt.finish(b.episode_id);
    const c = await rt.reset("notes-1", 13, "ep-open");
    await rt.step(c.episode_id, NOTES_REF[1]);
  } finally {
    await rt.close();
    writer.close();
  }
}

/** What `envscaler synth` leaves behind, for the notes env: report.json, build/<env>/build-report.json, envs/<env>/. */
export function makeSynthRun(run: string): string {
  cpSync(join(FIXTURES, "notes"), join(run, "envs", "notes"), { recursive: true });
  mkdirSync(join(run, "build", "notes"), { recursive: true });
  const cases = [
    { round: 1, tool: "add_note", arguments: { user_id: "u1", title: "a", body: "b" }, case_type: "positive", expectation: "a note is added", observation: '{"note_id":"n2"}', diff: [{ op: "add", path: "/notes/n2" }], result: "pass", reason: "the note was stored" },
    { round: 2, tool: "delete_note", arguments: { note_id: "zz" }, case_type: "negative", expectation: "an error", observation: '{"error":"no note zz"}', diff: [], result: "warning", reason: "the message could name the user" },
  ];
  writeFileSync(join(run, "build", "notes", "build-report.json"), JSON.stringify({ env_id: "notes-v1", topic: "personal notes", pass_rate: 1, kept: true, cases }));
  writeFileSync(
    join(run, "report.json"),
    JSON.stringify({
      mine: { input: "tasks.jsonl", envs: 2, rejected: [{ item: "Translate this poem", reason: "no stateful env needed: pure text" }] },
      build: { envs: [{ env_id: "notes-v1", topic: "personal notes", pass_rate: 1, kept: true, cases: 2 }, { env_id: "fax-v1", topic: "fax", pass_rate: 0.5, kept: false, cases: 2 }], rejected: [{ item: "fax-v1", reason: "dual-agent test pass rate 0.5 < 0.85" }] },
      scenarios: { envs: { "notes-v1": ["notes-1", "notes-2"] }, rejected: [{ item: "notes-v1 scenario 3", reason: "the reference solution scores 0.5" }], check: {} },
      usage: {},
    }),
  );
  return join(run, "envs");
}
