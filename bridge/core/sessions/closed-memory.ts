/**
 * Why each recently closed session closed, by id (and by any other name it had, such as an MCP
 * rollout tag), so a late request learns *why* its session is gone instead of a bare "unknown".
 * Bounded: the oldest is forgotten first once there are `max`.
 */
export class ClosedMemory {
  private readonly why = new Map<string, string>();

  constructor(private readonly max: number) {}

  remember(key: string, why: string): void {
    this.why.set(key, why);
    if (this.why.size > this.max) this.why.delete(this.why.keys().next().value!);
  }

  get(key: string): string | undefined {
    return this.why.get(key);
  }
}
