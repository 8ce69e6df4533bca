// A long-running command must not outlive the process that started it. Nothing tells a child
// when its parent dies (Node has no PR_SET_PDEATHSIG, and `process.ppid` is read once at start),
// so the command polls the processes it belongs to and stops itself, as on SIGTERM, once one is
// gone, whatever ended it: an exit, an exception, SIGTERM, SIGKILL.
//
// Which processes: the ones named with `--parent-pid` (envscaler.launch() names itself), and the
// npm/npx that ran this command. npm runs a bin as `sh -c 'envscaler …'` and on SIGTERM signals
// only that shell, which dies without passing the signal on; after a SIGKILL of npm the shell
// lives on. So the shells between npm and us, and npm itself, are watched too. A command started
// any other way (a shell, nohup, systemd) is not tied to its parent: a detached bridge stays up.
import { readFileSync } from "node:fs";

/** How often the watched processes are looked at. @unit ms */
export const PARENT_POLL_MS = 250;

const SHELLS = new Set(["sh", "dash", "bash", "zsh", "ash", "ksh"]);

interface ProcInfo {
  comm: string;
  state: string;
  ppid: number;
  /** Start time in clock ticks since boot: tells a process from a later one that reuses its pid. */
  start: string;
}

/** A process's identity from /proc/PID/stat (Linux); null when it does not exist or /proc is absent. */
function procInfo(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // the command name (field 2) is in parentheses and may contain anything: split after it
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), state: fields[0]!, ppid: Number(fields[1]), start: fields[19]! };
  } catch {
    return null;
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

const hasProc = () => procInfo(process.pid) !== null;

/** The npm (or npx) process that ran this one, and the shells between it and us; [] when npm did not. */
export function npmChain(env: NodeJS.ProcessEnv = process.env): number[] {
  if (!env.npm_execpath || !hasProc()) return [];
  const chain: number[] = [];
  let pid = procInfo(process.pid)!.ppid;
  for (let depth = 0; depth < 4 && pid > 1; depth++) {
    const p = procInfo(pid);
    if (!p) return [];
    chain.push(pid);
    // npm sets its title to `npm exec …` / `npm run …`; before it does, its argv names npm-cli.js
    const cmd = cmdline(pid);
    if (cmd.startsWith("npm ") || /\bnp[mx]-cli\.js\b/.test(cmd)) return chain;
    if (!SHELLS.has(p.comm)) return []; // started by something else that merely inherited npm's env
    pid = p.ppid;
  }
  return [];
}

/** A check that is true while process `pid` (as it is now) runs. */
function liveness(pid: number): () => boolean {
  const first = procInfo(pid);
  if (first) return () => {
    const now = procInfo(pid);
    // a zombie has ended (its parent has not reaped it yet); a new start time is another process
    return now !== null && now.state !== "Z" && now.state !== "X" && now.start === first.start;
  };
  if (hasProc()) return () => false; // already gone
  return () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by another user
    }
  };
}

/**
 * Calls `onGone(pid)` once, within PARENT_POLL_MS, after the first of `pids` ends (at once if one
 * has already ended). The timer does not keep the process alive. Returns a function that stops watching.
 */
export function watchProcesses(pids: number[], onGone: (pid: number) => void, intervalMs = PARENT_POLL_MS): () => void {
  const checks = [...new Set(pids)].map((pid) => ({ pid, alive: liveness(pid) }));
  if (!checks.length) return () => undefined;
  const look = () => {
    const gone = checks.find((c) => !c.alive());
    if (!gone) return;
    clearInterval(timer);
    onGone(gone.pid);
  };
  const timer = setInterval(look, intervalMs);
  timer.unref();
  setImmediate(look);
  return () => clearInterval(timer);
}
