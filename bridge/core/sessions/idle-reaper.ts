/**
 * The idle reaper of a front's sessions: every quarter of the idle timeout (between `minMs` and
 * 10 s) it hands `reap` the cutoff time; what was last used before it and is not busy goes. The
 * timer does not keep the process alive.
 */
export class IdleReaper {
  private readonly timer: NodeJS.Timeout;
  private running = false;

  constructor(
    readonly idleMs: number,
    reap: (cutoff: number) => Promise<void>,
    minMs = 100,
    maxMs = 10_000,
  ) {
    this.timer = setInterval(() => {
      // a slow pass (closing many sessions) is not overlapped by the next one
      if (this.running) return;
      this.running = true;
      const done = () => void (this.running = false);
      reap(Date.now() - idleMs).then(done, done);
    }, Math.max(minMs, Math.min(maxMs, idleMs / 4)));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
