/** Why a sandbox had to be abandoned. Each ends the episode that owns the sandbox, nothing else. */
export type SandboxFaultCode = "env_timeout" | "env_oom" | "env_crashed" | "env_output_invalid";

/**
 * A sandbox that raised this is poisoned: the owner must drop it without calling into it again.
 * Guest exceptions (a tool that throws) are not faults; they come back as ordinary results.
 */
export class SandboxFault extends Error {
  override readonly name = "SandboxFault";
  constructor(
    readonly code: SandboxFaultCode,
    message: string,
  ) {
    super(message);
  }
}
