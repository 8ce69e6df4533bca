import type { Scenario, ToolSchema } from "../../../envs/format/bundle-schema.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";

const openingToolsCache = new WeakMap<Scenario, ToolSchema[]>();
/**
 * The tools an episode of this scenario shows at reset: the env's, less those a later user turn
 * adds (multi-turn scenarios). Computed once per scenario, so every reset shares one array.
 */
export function openingTools(bundle: EnvBundle, scenario: Scenario): ToolSchema[] {
  let tools = openingToolsCache.get(scenario);
  if (!tools) {
    const held = new Set((scenario.user_turns ?? []).flatMap((t) => t.add_tools ?? []));
    // frozen: every episode of the scenario shares it
    tools = Object.freeze(bundle.manifest.tools.filter((t) => !held.has(t.function.name))) as ToolSchema[];
    openingToolsCache.set(scenario, tools);
  }
  return tools;
}

const toolsByNameCache = new WeakMap<EnvBundle, Map<string, ToolSchema>>();
/**
 * The env's tools with these names, in this order (unknown names left out): what a forked or
 * restored episode shows. The name index is built once per bundle (a fork group asked a linear
 * search per tool per fork).
 */
export function toolsNamed(bundle: EnvBundle, names: readonly string[]): ToolSchema[] {
  let byName = toolsByNameCache.get(bundle);
  if (!byName) toolsByNameCache.set(bundle, (byName = new Map(bundle.manifest.tools.map((t) => [t.function.name, t]))));
  const out: ToolSchema[] = [];
  for (const n of names) {
    const t = byName.get(n);
    if (t !== undefined) out.push(t);
  }
  return out;
}
