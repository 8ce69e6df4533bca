import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";

interface ListArgs {
  what: "all" | "envs" | "scenarios";
  envs: string[];
  env?: string;
  json: boolean;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The envs and scenarios of some bundle folders, as lines (or JSON) for people and scripts. */
export function listing(args: Omit<ListArgs, "json">): { envs: { env_id: string; name: string; tools: number; scenarios: { scenario_id: string; mode: string; max_steps: number; task: string }[] }[] } {
  const registry = EnvRegistry.load(args.envs);
  const envs = registry.list().filter((b) => !args.env || b.id === args.env);
  if (args.env && envs.length === 0) throw new Error(`no env ${args.env}; the envs are: ${registry.list().map((b) => b.id).join(", ")}`);
  return {
    envs: envs.map((b) => ({
      env_id: b.id,
      name: b.manifest.name,
      tools: b.manifest.tools.length,
      scenarios: [...b.scenarios.values()].map((s) => ({ scenario_id: s.id, mode: s.mode, max_steps: s.max_steps ?? b.manifest.max_steps, task: s.task })),
    })),
  };
}

export const listCommand: CommandModule<object, ListArgs> = {
  command: "list [what]",
  describe: "List the envs and scenarios a bridge would serve (what: all, envs or scenarios)",
  builder: (y: Argv) =>
    y
      .positional("what", { choices: ["all", "envs", "scenarios"] as const, default: "all" as const })
      .option("envs", { type: "string", array: true, default: [BUNDLED_ENVS], describe: "bundle folder(s), or folders of bundles (default: the bundled envs)" })
      .option("env", { type: "string", describe: "only this env id" })
      .option("json", { type: "boolean", default: false, describe: "print JSON" }),
  // async: a throw (an unknown --env, a missing folder) becomes a rejection main prints as one line, not a stack trace
  // eslint-disable-next-line @typescript-eslint/require-await
  handler: async (args: ArgumentsCamelCase<ListArgs>) => {
    const { envs } = listing(args);
    if (args.json) {
      console.log(JSON.stringify(args.what === "envs" ? envs.map(({ scenarios, ...e }) => ({ ...e, scenario_count: scenarios.length })) : args.what === "scenarios" ? envs.flatMap((e) => e.scenarios.map((s) => ({ ...s, env_id: e.env_id }))) : envs));
      return;
    }
    for (const e of envs) {
      if (args.what !== "scenarios") console.log(`${e.env_id}  ${e.name} (${e.tools} tools, ${e.scenarios.length} scenarios)`);
      if (args.what === "envs") continue;
      for (const s of e.scenarios) console.log(`  ${s.scenario_id.padEnd(16)} ${s.mode.padEnd(12)} ${clip(s.task.replace(/\s+/g, " "), 90)}`);
    }
  },
};
