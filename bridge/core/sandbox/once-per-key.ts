/**
 * A build per key, started once: concurrent callers share its promise (a burst of resets arriving
 * before the first sandbox image exists builds it once), and a failed build is forgotten so the
 * next caller tries again. Images (env and check) are kept this way.
 */
export class OncePerKey<T> {
  private readonly builds = new Map<string, Promise<T>>();

  get(key: string, build: () => Promise<T>): Promise<T> {
    let p = this.builds.get(key);
    if (!p) {
      p = build();
      this.builds.set(key, p);
      p.catch(() => this.builds.delete(key));
    }
    return p;
  }
}
