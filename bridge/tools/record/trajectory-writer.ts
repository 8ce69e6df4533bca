import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readFileSync, statfsSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { crc32 } from "node:zlib";

/** The format of the files this version writes: the first record of every file says so. */
export const TRAJECTORY_FORMAT = "envscaler.trajectory/v1";

/** One line of a trajectory file: `<crc32 of the JSON, 8 hex digits> <JSON>\n`. */
export function encodeRecord(record: object): string {
  const json = JSON.stringify(record);
  return `${crc32(json).toString(16).padStart(8, "0")} ${json}\n`;
}

/** What happens once a record could not be written: refuse every later step, or go on without recording. */
export type RecordFailurePolicy = "refuse" | "continue";

/** The typed error the server answers with (`recording_unavailable`) when a step's record cannot be written. */
export class RecordingUnavailableError extends Error {
  readonly code = "recording_unavailable";
  constructor(message: string) {
    super(message);
    this.name = "RecordingUnavailableError";
  }
}

export interface TrajectoryWriterOptions {
  /** @default "refuse" */
  onFailure?: RecordFailurePolicy;
  /**
   * Free room that must be left on the file system, and below the process's file-size limit
   * (RLIMIT_FSIZE), for check() to let a step run: a step whose record would not fit is refused
   * before it runs rather than torn after it ran. @unit bytes @default 16 MiB
   */
  reserveBytes?: number;
  /** Called once, when the writer stops being able to record (to log it). */
  onUnavailable?: (reason: string) => void;
  /** The write(2) to use; tests inject faults here. */
  write?: (fd: number, data: Buffer, offset: number) => number;
}

/** The process's file-size limit from /proc (Infinity where there is none or /proc is absent). */
function fileSizeLimit(): number {
  try {
    const line = readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max file size"));
    const soft = line?.slice(26).trim().split(/\s+/)[0];
    return soft && /^\d+$/.test(soft) ? Number(soft) : Infinity;
  } catch {
    return Infinity;
  }
}

const FREE_SPACE_EVERY_MS = 200;

/**
 * Appends trajectory records to one file with a write(2) per record: a process killed at any
 * moment leaves every earlier record on disk (the OS has it), and at most one torn last line,
 * which readers detect by its checksum and skip. Each process writes its own file, so a restart
 * never appends behind a torn tail. The first record is a format header.
 *
 * It fails closed: a short write or a write error (disk full, file too large, I/O error) is never
 * ignored. The torn bytes are cut off again (the file ends at the last whole record), the writer
 * becomes unavailable, and with the `refuse` policy check() and append() throw
 * RecordingUnavailableError from then on; with `continue` they do not, and records are counted
 * in `dropped` instead. check() also refuses in advance when the file system's free room or the
 * file-size limit left is under `reserveBytes`, so in the usual case of a filling disk no step
 * runs whose record cannot be written.
 */
export class TrajectoryWriter {
  private fd: number | null;
  /** Bytes of whole records in the file. */
  private size: number;
  /** Why the writer failed: in full for the server's log (onUnavailable), and as told to clients (`told`: no path, no system error text). */
  private failure: string | null = null;
  private failureTold: string | null = null;
  private freeCheckedAt = -Infinity;
  private lowOnRoom: { reason: string; told: string } | null = null;
  private readonly sizeLimit = fileSizeLimit();
  private readonly policy: RecordFailurePolicy;
  private readonly reserve: number;
  private readonly write: (fd: number, data: Buffer, offset: number) => number;
  records = 0;
  /** Records not written because the writer was unavailable (`continue` policy). */
  dropped = 0;

  constructor(
    readonly path: string,
    private readonly options: TrajectoryWriterOptions = {},
  ) {
    this.policy = options.onFailure ?? "refuse";
    this.reserve = options.reserveBytes ?? 16 << 20;
    this.write = options.write ?? ((fd, data, offset) => writeSync(fd, data, offset));
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, "a");
    this.size = fstatSync(this.fd).size;
    if (this.size === 0) this.writeRecord({ t: "header", format: TRAJECTORY_FORMAT, created: new Date().toISOString(), pid: process.pid });
  }

  /** Why records cannot be written now (null when they can). */
  unavailableReason(): string | null {
    if (this.failure) return this.failure;
    if (this.fd === null) return "the trajectory writer is closed";
    return this.room()?.reason ?? null;
  }

  /** Why records cannot be written now, as a client may be told it (no server path or system error text); null when they can. */
  private toldReason(): string | null {
    if (this.failure) return this.failureTold;
    if (this.fd === null) return "the trajectory writer is closed";
    return this.room()?.told ?? null;
  }

  private room(): { reason: string; told: string } | null {
    const now = performance.now();
    if (now - this.freeCheckedAt >= FREE_SPACE_EVERY_MS) {
      this.freeCheckedAt = now;
      this.lowOnRoom = this.roomProblem();
    }
    return this.lowOnRoom;
  }

  /** True when the next record can be written (whatever the policy: check() applies the policy). */
  healthy(): boolean {
    return this.unavailableReason() === null;
  }

  /**
   * Call before running a step that will be recorded: throws RecordingUnavailableError when its
   * record cannot be written and the policy is `refuse`. A no-op under `continue`.
   */
  check(): void {
    const why = this.unavailableReason() === null ? null : this.toldReason();
    if (why && this.policy === "refuse") throw new RecordingUnavailableError(`recording unavailable: ${why}; the step was not run`);
  }

  append(record: object): void {
    if (this.failure || this.fd === null) {
      if (this.policy === "refuse") throw new RecordingUnavailableError(`recording unavailable: ${this.failureTold ?? "the trajectory writer is closed"}`);
      this.dropped++;
      return;
    }
    this.writeRecord(record);
    if (this.failure && this.policy === "refuse") throw new RecordingUnavailableError(`recording unavailable: ${this.failureTold}`);
    if (this.failure) this.dropped++;
    else this.records++;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private writeRecord(record: object): void {
    const data = Buffer.from(encodeRecord(record));
    let done = 0;
    try {
      // write(2) may write less than asked; a second call that also makes no progress (or fails) is the fault
      while (done < data.length) {
        const n = this.write(this.fd!, data, done);
        if (n <= 0) throw new Error(`short write: ${done} of ${data.length} bytes, then no progress`);
        done += n;
      }
      this.size += data.length;
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      const what = err.code ? `${err.code} (${err.message})` : err.message;
      this.fail(`writing ${this.path} failed after ${done} of ${data.length} bytes of a record: ${what}`, `writing the trajectory file failed after ${done} of ${data.length} bytes of a record${err.code ? ` (${err.code})` : ""}; the server's log has the details`);
    }
  }

  private fail(reason: string, told: string): void {
    this.failure = reason;
    this.failureTold = told;
    // cut the torn record off, so the file still ends at a whole record (best effort: the disk is failing)
    try {
      if (this.fd !== null) ftruncateSync(this.fd, this.size);
    } catch {
      /* the reader skips a torn tail anyway */
    }
    this.options.onUnavailable?.(reason);
  }

  private roomProblem(): { reason: string; told: string } | null {
    if (this.size + this.reserve > this.sizeLimit) return { reason: `${this.path} is within ${this.reserve} bytes of the process's file-size limit (${this.sizeLimit} bytes)`, told: `the trajectory file is within ${this.reserve} bytes of the process's file-size limit` };
    try {
      const s = statfsSync(dirname(this.path));
      const free = s.bavail * s.bsize;
      if (free < this.reserve) return { reason: `only ${free} bytes are free on the file system of ${this.path} (at least ${this.reserve} are kept in reserve)`, told: `only ${free} bytes are free on the file system of the trajectory file (at least ${this.reserve} are kept in reserve)` };
    } catch {
      /* statfs unsupported here: rely on write errors */
    }
    return null;
  }
}
