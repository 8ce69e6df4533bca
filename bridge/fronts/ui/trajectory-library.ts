import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { CHART_CSS, reportCharts } from "../../tools/record/report-charts.js";
import { episodePage } from "../../tools/record/episode-page.js";
import type { ReplayResult } from "../../tools/record/replay.js";
import { episodeReward, filterProblem, toChat, type SftRecord } from "../../tools/record/sft-export.js";
import { readTrajectories, TrajectoryFormatError, type RecordedEpisode, type TrajectoryFile } from "../../tools/record/trajectory-reader.js";
import { ApiError } from "./http-util.js";
import { replayIsolated } from "./replay-isolated.js";

export interface EpisodeSummary {
  file: string;
  episode_id: string;
  env_id: string;
  scenario_id: string;
  seed: number;
  steps: number;
  reward: number | null;
  end_reason: string | null;
  /** How the recording ends: terminal, finish, closed, or `open` (no end record: still running, or the writer died). */
  how: string;
  time: string;
}

export interface EpisodeFilter {
  env?: string;
  scenario?: string;
  minReward?: number;
  maxReward?: number;
  endReason?: string;
}

/** Folders are walked this deep for *.jsonl files (a recordings folder holds one file per replica run). */
const MAX_DEPTH = 4;

/**
 * The trajectory files under one folder: listed, read (and re-read only when a file changes),
 * filtered, shown with the same page `envscaler view` writes, replayed and exported. Paths from
 * requests are names relative to the folder and may not leave it.
 */
export class TrajectoryLibrary {
  private readonly cache = new Map<string, { key: string; file: TrajectoryFile }>();
  readonly root: string;
  /** Files the listing could not use (a symlink out of the folder, a file in another format): reported, never fatal. */
  private refused: { file: string; line: number; reason: string }[] = [];

  constructor(
    root: string,
    private readonly envs: string[],
    private readonly hardStopGraceMs = 1000,
  ) {
    this.root = resolve(root);
  }

  files(): string[] {
    const out: string[] = [];
    this.refused = [];
    const root = this.realRoot();
    const walk = (dir: string, depth: number) => {
      let names: string[];
      try {
        names = readdirSync(dir).sort();
      } catch {
        return;
      }
      for (const n of names) {
        const p = join(dir, n);
        // a symlink is followed only when it stays inside the folder (names cannot leave it, docs/ui.md)
        let real: string;
        try {
          real = realpathSync(p);
        } catch {
          continue; // a dangling link
        }
        if (root === null || !real.startsWith(root + sep)) {
          if (n.endsWith(".jsonl")) this.refused.push({ file: relative(this.root, p), line: 0, reason: "a link to a file outside the trajectories folder: not read" });
          continue;
        }
        const st = statSync(real, { throwIfNoEntry: false });
        if (st?.isDirectory() && depth < MAX_DEPTH) walk(p, depth + 1);
        else if (st?.isFile() && n.endsWith(".jsonl")) out.push(relative(this.root, p));
      }
    };
    if (existsSync(this.root)) walk(this.root, 0);
    return out;
  }

  private realRoot(): string | null {
    try {
      return realpathSync(this.root);
    } catch {
      return null;
    }
  }

  /** The file a request names, resolved with realpath: refused unless it is a .jsonl file inside the folder. */
  private path(file: string): string {
    const p = resolve(this.root, file);
    if (!p.startsWith(this.root + sep) || !p.endsWith(".jsonl")) throw new ApiError(400, "bad_request", `${file} is not a .jsonl file inside the trajectories folder`);
    if (!existsSync(p)) throw new ApiError(404, "not_found", `no trajectory file ${file}`);
    const root = this.realRoot();
    const real = realpathSync(p);
    if (root === null || !real.startsWith(root + sep) || !statSync(real).isFile()) throw new ApiError(400, "bad_request", `${file} leads outside the trajectories folder (a symlink) or is not a file`);
    return real;
  }

  read(file: string): TrajectoryFile {
    const p = this.path(file);
    const st = statSync(p);
    const key = `${st.mtimeMs}:${st.size}`;
    const hit = this.cache.get(p);
    if (hit?.key === key) return hit.file;
    let t: TrajectoryFile;
    try {
      t = readTrajectories(p);
    } catch (e) {
      // another format, a newer one, an empty file: the file's problem, told by its name (relative), never the server's path
      const why = e instanceof TrajectoryFormatError ? e.message.split(p).join(file) : "it could not be read";
      throw new ApiError(422, "bad_trajectory_file", why);
    }
    this.cache.set(p, { key, file: t });
    return t;
  }

  list(filter: EpisodeFilter = {}): { episodes: EpisodeSummary[]; skipped: { file: string; line: number; reason: string }[] } {
    const episodes: EpisodeSummary[] = [];
    const skipped: { file: string; line: number; reason: string }[] = [];
    for (const file of this.files()) {
      let t: TrajectoryFile;
      try {
        t = this.read(file);
      } catch (e) {
        // one bad file is reported and skipped; it never fails the listing
        skipped.push({ file, line: 0, reason: e instanceof Error ? e.message : String(e) });
        continue;
      }
      skipped.push(...t.skipped.map((s) => ({ file, ...s })));
      for (const e of t.episodes) episodes.push(summary(file, e));
    }
    skipped.push(...this.refused);
    return { episodes: episodes.filter((e) => matches(e, filter)), skipped };
  }

  episode(file: string, id: string): RecordedEpisode {
    const e = this.read(file).episodes.find((x) => x.start.episode_id === id);
    if (!e) throw new ApiError(404, "unknown_episode", `no episode ${id} in ${file}`);
    return e;
  }

  /** The page `envscaler view` writes for this episode. */
  page(file: string, id: string): string {
    return episodePage(this.episode(file, id));
  }

  /**
   * The charts of the episodes a filter selects, as a page of its own (inline CSS and SVG, no
   * scripts) that the Trajectories view frames: the same charts as a rollout's report.html. An
   * episode succeeded when its reward is 1; one with no end reason is named by how its recording
   * ends (closed, open).
   */
  chartsPage(filter: EpisodeFilter = {}): string {
    const eps = this.list(filter).episodes;
    const run = {
      label: "selected episodes",
      episodes: eps.map((e) => ({ env_id: e.env_id, scenario_id: e.scenario_id, reward: e.reward, success: e.reward !== null && e.reward >= 1 - 1e-9, steps: e.steps, end: e.end_reason ?? e.how })),
    };
    const body = eps.length ? reportCharts([run]) : `<p>No episodes match the filter.</p>`;
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>charts · ${eps.length} episodes</title><style>body{font:13px/1.4 system-ui,sans-serif;margin:8px;background:#f5f6f8;color:#1d2330}${CHART_CSS}@media (min-width:1700px){.charts{grid-template-columns:repeat(3,minmax(0,1fr))}}.fig svg{max-width:640px}</style></head><body>${body}</body></html>\n`;
  }

  replay(file: string, id: string): Promise<ReplayResult> {
    return replayIsolated(this.envs, this.episode(file, id), this.hardStopGraceMs);
  }

  /** The selected episodes as SFT records (episodes that did not end are left out, as `envscaler export sft` does). */
  /** The CLI export's rules (placeholder user turns never exported); `why` says, per episode left out, the reason. */
  exportSft(items: { file: string; episode_id: string }[]): { records: SftRecord[]; left_out: string[]; why: { episode_id: string; why: string }[] } {
    const eps = items.map((i) => this.episode(i.file, i.episode_id));
    const why = eps.flatMap((e) => {
      const problem = filterProblem(e, {});
      return problem === null ? [] : [{ episode_id: e.start.episode_id, why: problem }];
    });
    const out = new Set(why.map((w) => w.episode_id));
    return { records: eps.filter((e) => !out.has(e.start.episode_id)).map(toChat), left_out: [...out], why };
  }
}

function summary(file: string, e: RecordedEpisode): EpisodeSummary {
  const last = e.end?.how === "finish" ? e.end.result : e.steps.at(-1);
  return {
    file,
    episode_id: e.start.episode_id,
    env_id: e.start.env_id,
    scenario_id: e.start.scenario_id,
    seed: e.start.seed,
    steps: e.steps.length,
    reward: episodeReward(e),
    end_reason: last?.end_reason ?? null,
    how: e.end?.how ?? "open",
    time: e.start.time,
  };
}

function matches(e: EpisodeSummary, f: EpisodeFilter): boolean {
  if (f.env && e.env_id !== f.env) return false;
  if (f.scenario && !e.scenario_id.includes(f.scenario)) return false;
  if (f.minReward !== undefined && (e.reward === null || e.reward < f.minReward)) return false;
  if (f.maxReward !== undefined && (e.reward === null || e.reward > f.maxReward)) return false;
  if (f.endReason && (e.end_reason ?? e.how) !== f.endReason) return false;
  return true;
}
