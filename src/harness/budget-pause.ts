import type { Sandbox } from "../sandbox/types.js";

/**
 * How a run pauses at its money budget instead of failing: the work so far is committed in the
 * sandbox (not pushed), the sandbox is paused and handed to `keep`, which owns it from then on
 * (the run does not tear it down), and the report says `paused` with what a continuation needs.
 */
export interface HarnessPause {
  keep(sandbox: Sandbox): Promise<void>;
}

/** Where a continuation of a paused run starts. */
export interface HarnessContinuation {
  /** The sandbox the run paused in, when it is still at hand: the run goes on in it, from the step it stopped in. */
  sandbox?: Sandbox;
  /** The commit the paused run started from (its work is committed on it in that sandbox). */
  baseSha: string;
  /** The agent step the run paused in. */
  nodeId: string;
  /** The work so far as a patch: applied to a fresh checkout when the sandbox is not at hand. */
  patch?: string;
}

/** Longest patch of a paused run's work that is kept (a patch of the change is cut far below this). */
export const MAX_KEPT_PATCH_BYTES = 1024 * 1024;
