// The options several commands take are defined once (cli/option-groups.ts); this holds every
// command to one default per option name, so `--workers` (0 in serve, 1 in mcp before) cannot drift.
import yargs, { type Argv, type CommandModule } from "yargs";
import { expect, test } from "vitest";
import { evalCommand } from "../../cli/commands/eval.js";
import { listCommand } from "../../cli/commands/list.js";
import { mcpCommand } from "../../cli/commands/mcp.js";
import { rolloutCommand } from "../../cli/commands/rollout.js";
import { serveCommand } from "../../cli/commands/serve.js";
import { replayCommand } from "../../cli/commands/trajectories.js";
import { uiCommand } from "../../cli/commands/ui.js";

const COMMANDS = { serve: serveCommand, mcp: mcpCommand, ui: uiCommand, rollout: rolloutCommand, eval: evalCommand, list: listCommand, replay: replayCommand } as Record<string, CommandModule<object, object>>;

/** Each command's options and their defaults, as its builder declares them. */
function declared(cmd: CommandModule<object, object>): { keys: string[]; defaults: Record<string, unknown> } {
  const y = yargs([]);
  (cmd.builder as (y: Argv) => Argv)(y);
  const o = (y as unknown as { getOptions(): { key: Record<string, unknown>; default: Record<string, unknown> } }).getOptions();
  return { keys: Object.keys(o.key).filter((k) => !["help", "version"].includes(k)), defaults: o.default };
}

/**
 * Options of one name that mean different things per command, with why. Nothing else may differ.
 * port: two servers may run side by side on one machine; ui's idle-timeout closes a page's episode a
 * person left (minutes of reading), serve's and mcp's a trainer's session; scenarios: mcp takes one
 * glob its sessions may pick from, rollout and eval a list to play (empty: all); seed: mcp's is the
 * seed of sessions that name none (unset: random per session), rollout's and eval's trial 0's.
 */
const DIFFERENT: Record<string, string[]> = { port: ["mcp", "ui"], "idle-timeout": ["ui"], scenarios: ["mcp"], seed: ["mcp"] };

test("every option that several commands take has one default", () => {
  const seen = new Map<string, { command: string; value: unknown }[]>();
  for (const [name, cmd] of Object.entries(COMMANDS)) {
    const { keys, defaults } = declared(cmd);
    for (const k of keys) seen.set(k, [...(seen.get(k) ?? []), { command: name, value: defaults[k] }]);
  }
  const shared = [...seen].filter(([, v]) => v.length > 1);
  // the groups are really shared (a command that dropped one would make this pass vacuously)
  for (const k of ["envs", "workers", "max-snapshots", "max-snapshot-mb", "hard-stop-grace-ms", "user-model", "user-base-url", "user-timeout", "record", "record-dir", "host"]) expect(seen.get(k)?.length ?? 0, k).toBeGreaterThan(1);
  for (const [k, uses] of shared) {
    const compared = uses.filter((u) => !DIFFERENT[k]?.includes(u.command));
    for (const u of compared) expect({ option: k, command: u.command, value: u.value }).toEqual({ option: k, command: u.command, value: compared[0]!.value });
  }
  expect(seen.get("workers")!.map((u) => u.value)).toEqual([0, 0, 0, 0]);
});
