import type { NodeReport, PushResult, RunReport } from "./types.js";

/** One line of the checklist users see: a blueprint node as planned. */
export interface PlannedNode {
  id: string;
  title: string;
  kind: "exec" | "agent";
  /** True for nodes that run only as another node's retry target (e.g. `fix`). */
  onFailureOnly: boolean;
}

/**
 * What a run tells its reporters, in order. Every string in an event has already passed
 * through the run's redactor (see `redactingReporter`), so reporters can show them as they are.
 * Times are ISO-8601 UTC strings.
 */
export type HarnessEvent =
  | {
      type: "run.started";
      runId: string;
      repo: string;
      branch: string;
      intent: string;
      blueprint: string;
      nodes: PlannedNode[];
      at: string;
    }
  | { type: "sandbox.ready"; runId: string; workDir: string; at: string }
  | {
      type: "node.started";
      runId: string;
      nodeId: string;
      title: string;
      kind: "exec" | "agent";
      attempt: number;
      at: string;
    }
  /** The latest tail of a running node's output (stdout and stderr interleaved), throttled. */
  | { type: "node.output"; runId: string; nodeId: string; attempt: number; tail: string; at: string }
  /**
   * Output appended since the last `node.log` of this node attempt: whole lines only (stdout and
   * stderr interleaved as they came), batched. Emitted only when the run asks for it
   * (`outputLogMs`), for readers that keep the whole log, such as the run pages.
   */
  | { type: "node.log"; runId: string; nodeId: string; attempt: number; text: string; at: string }
  /**
   * What a running agent is doing, in a few words ("editing `src/x.ts`", "running `npm test`"),
   * read from its live events; at most one a second per step.
   */
  | { type: "node.progress"; runId: string; nodeId: string; attempt: number; text: string; at: string }
  | { type: "node.finished"; runId: string; report: NodeReport; at: string }
  /**
   * Something the people following the run should know that is not a step's outcome, said once
   * (e.g. that its cost budget cannot be held): one plain sentence.
   */
  | {
      type: "run.notice";
      runId: string;
      text: string;
      at: string;
      /** For the log and the run page only: a diagnostic the people on the issue need not read. */
      quiet?: boolean;
    }
  | { type: "commit.finished"; runId: string; commitSha?: string; changedFiles: number; at: string }
  | { type: "push.finished"; runId: string; result: PushResult; at: string }
  | { type: "run.finished"; runId: string; report: RunReport; at: string };

export type HarnessEventType = HarnessEvent["type"];

/** Receives a run's events. `emit` must not throw or block; `close` flushes what it holds. */
export interface Reporter {
  emit(event: HarnessEvent): void;
  close?(): Promise<void>;
}

/** Sends every event to several reporters; one failing reporter does not silence the others. */
export function fanOut(...reporters: Reporter[]): Reporter {
  return {
    emit(event) {
      for (const reporter of reporters) {
        try {
          reporter.emit(event);
        } catch {
          // A broken reporter (a closed file, say) must not stop the run or the other reporters.
        }
      }
    },
    async close() {
      await Promise.allSettled(reporters.map(async (reporter) => reporter.close?.()));
    },
  };
}
