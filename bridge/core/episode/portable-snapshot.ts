// An episode snapshot as plain data, so another thread can restore it. An EpisodeSnapshot holds
// objects bound to the thread that took it (the shared state base, the simulated user's HTTP
// client); this keeps only what a structured clone carries (the sandbox's memory pages, the
// changed records, the conversation) and rebinds the rest on the thread that restores it. The
// engine pool keeps one per long episode of an engine worker, so an episode whose worker the
// watchdog had to stop comes back by copying memory and re-running only the steps since.
import type { SandboxImage } from "../sandbox/sandbox.js";
import { StateView, type StateBase } from "../state/state-base.js";
import { StateHash } from "../state/state-hash.js";
import { StateTracker } from "../state/state-tracker.js";
import type { EpisodeSnapshot } from "./episode.js";
import type { UserConversation, UserSimulator } from "./user-simulator.js";

/** A StateView without its base: the records that differ from it and the top-level keys. */
interface PortableView {
  records: [collection: string, changed: [id: string, json: string | null][]][];
  top: [key: string, value: string | { collection: true }][];
}

export interface PortableSnapshot extends Omit<EpisodeSnapshot, "env" | "user"> {
  readonly image: SandboxImage;
  readonly methods: string[];
  readonly state: PortableView;
  readonly initial: PortableView;
  /** The simulated user's conversation (null: the episode has no simulated user). */
  readonly user: UserConversation | null;
}

function portableView(view: StateView): PortableView {
  return { records: [...view.records].map(([c, m]) => [c, [...m]]), top: [...view.top] };
}

function boundView(p: PortableView, base: StateBase): StateView {
  return new StateView(base, new Map(p.records.map(([c, m]) => [c, new Map(m)])), new Map(p.top));
}

/** `snap` as plain data; throws when its simulated user cannot be carried (no `conversation()`). */
export function toPortable(snap: EpisodeSnapshot): PortableSnapshot {
  const { env, user, ...rest } = snap;
  if (user && !user.conversation) throw new Error("this episode's simulated user cannot be carried to another thread");
  return { ...rest, image: env.image, methods: env.methods, state: portableView(env.tracker.view), initial: portableView(env.initial), user: user?.conversation?.() ?? null };
}

/**
 * The snapshot bound to this thread: `base` is the scenario's state base here (the same content as
 * where it was taken), `resumeUser` rebuilds the simulated user from its conversation.
 */
export function fromPortable(p: PortableSnapshot, base: StateBase, resumeUser: (c: UserConversation) => UserSimulator | undefined): EpisodeSnapshot {
  const { image, methods, state, initial, user, ...rest } = p;
  const tracker = new StateTracker(base, { view: boundView(state, base), hash: StateHash.fromHex(p.stateHash) });
  return { ...rest, env: { image, methods, tracker, initial: boundView(initial, base) }, user: user ? resumeUser(user) : undefined };
}
