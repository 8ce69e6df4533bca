import type { Worker } from "node:worker_threads";
import type { StepResult } from "../episode/episode.js";
import type { ScoreJob } from "../episode/score-job.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import { DeadlineBoard, Watchdog } from "./watchdog.js";
import { startWorker } from "./worker-thread.js";

/** What the scorer thread answers for a job: its score, or why there is none. */
export interface ScorerReply {
  id: number;
  result?: StepResult;
  error?: string;
}

/**
 * A thread of its own that scores episodes a reset ended (finish_later), so the thread serving the
 * replica's episodes replies to the reset and goes on while another core runs the checks. Started
 * at its first job, ended by close(). Its checks run under the same sandbox limits as in the
 * engine; a check that ignores its deadline past `graceMs` (a builtin the sandbox cannot interrupt)
 * gets the thread stopped by a watchdog: the jobs it held fail with `env_timeout` and the next job
 * starts a new thread. A thread that dies fails its jobs the same way.
 */
export class Scorer {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, { resolve: (r: StepResult) => void; reject: (e: Error) => void }>();
  private readonly watchdog: Watchdog;
  private unwatch: (() => void) | null = null;
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly envPaths: string[],
    graceMs = 1000,
  ) {
    this.watchdog = new Watchdog(graceMs);
  }

  score(job: ScoreJob): Promise<StepResult> {
    if (this.closed) return Promise.reject(new SandboxFault("env_crashed", "the scorer is closed"));
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise<StepResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      try {
        worker.postMessage({ id, job });
      } catch (e) {
        this.pending.delete(id);
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  private start(): Worker {
    const board = new DeadlineBoard();
    // not the parent's flags: scoring needs none of them
    const worker = startWorker({ base: import.meta.url, name: "scorer-worker", data: { envPaths: this.envPaths }, board, execArgv: [] });
    this.worker = worker;
    this.unwatch = this.watchdog.watch(board, () => this.fail(worker, new SandboxFault("env_timeout", "a check ignored its deadline (a builtin that cannot be interrupted) and its scorer thread was stopped")));
    worker.on("message", (m: ScorerReply | { ready: true }) => {
      if (!("id" in m)) return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.result) p.resolve(m.result);
      else p.reject(new SandboxFault("env_crashed", `scoring failed: ${m.error ?? "no result"}`));
    });
    worker.on("error", (e) => this.fail(worker, new SandboxFault("env_crashed", `the scorer thread failed: ${e.message}`)));
    worker.on("exit", (code) => this.fail(worker, new SandboxFault("env_crashed", `the scorer thread exited (code ${code})`)));
    return worker;
  }

  /** The thread is gone or going: every job it held fails with `why`; the next job starts a new one. */
  private fail(worker: Worker, why: Error): void {
    if (this.worker !== worker) return;
    this.worker = null;
    this.unwatch?.();
    this.unwatch = null;
    void worker.terminate();
    const held = [...this.pending.values()];
    this.pending.clear();
    for (const p of held) p.reject(why);
  }

  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    if (w) {
      this.fail(w, new SandboxFault("env_crashed", "the scorer closed"));
      await w.terminate();
    }
    this.watchdog.close();
  }
}
