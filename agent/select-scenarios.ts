export interface ScenarioInfo {
  scenario_id: string;
  env_id: string;
  mode: "task" | "conversation";
  max_steps: number;
}

function globToRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${body}$`);
}

/**
 * The scenarios that `--scenarios` names, in the bridge's order: each pattern is a scenario id, a
 * glob over scenario ids (`library-*`), or an env id (all its scenarios). A pattern that matches
 * nothing is an error, so a typo never silently shrinks an evaluation.
 */
export function selectScenarios(all: ScenarioInfo[], patterns: string[]): ScenarioInfo[] {
  if (!patterns.length) return all;
  const chosen = new Set<string>();
  for (const p of patterns) {
    const re = globToRegExp(p);
    const hits = all.filter((s) => s.env_id === p || re.test(s.scenario_id));
    if (!hits.length) throw new Error(`--scenarios ${p} matches no scenario or env on the bridge`);
    for (const s of hits) chosen.add(s.scenario_id);
  }
  return all.filter((s) => chosen.has(s.scenario_id));
}
