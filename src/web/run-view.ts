import type { NodeReport, NodeStatus, PushResult, RunReport } from "../contracts/types.js";
import type { JournalEntry, JournalEvent } from "../runs/journal/port.js";

export type StepState = "pending" | "running" | NodeStatus;

/** One line of the checklist: a blueprint step, its latest attempt. */
export interface StepView {
  id: string;
  title: string;
  state: StepState;
  attempt: number;
  onFailureOnly: boolean;
  durationMs?: number;
  error?: string;
  /** Agent steps: what the agent says it did. */
  summary?: string;
}

/** A piece of the output pane: a step's heading, or text it printed. */
export type OutputPiece = { kind: "heading"; text: string } | { kind: "text"; text: string };

/** Everything the run page shows beside the summary, folded from the journal's entries. */
export interface RunView {
  blueprint?: string;
  branch?: string;
  steps: StepView[];
  output: OutputPiece[];
  commit?: { sha?: string; changedFiles: number };
  push?: PushResult;
  report?: RunReport;
  /** Times the run started again (a durable queue re-ran it after a shutdown). */
  restarts: number;
}

export function foldRun(entries: readonly JournalEntry[]): RunView {
  const view: RunView = { steps: [], output: [], restarts: 0 };
  const logged = new Set<string>();
  for (const { event } of entries) applyToView(view, event, logged);
  return view;
}

function applyToView(view: RunView, event: JournalEvent, logged: Set<string>): void {
  switch (event.type) {
    case "run.started":
      if (view.blueprint !== undefined) {
        view.restarts += 1;
        view.output.push({ kind: "heading", text: "▶ The run started again\n" });
      }
      view.blueprint = event.blueprint;
      view.branch = event.branch;
      view.steps = event.nodes.map((node) => ({
        id: node.id,
        title: node.title,
        state: "pending",
        attempt: 1,
        onFailureOnly: node.onFailureOnly,
      }));
      delete view.commit;
      delete view.push;
      delete view.report;
      break;
    case "node.started": {
      const step = stepOf(view, event.nodeId, event.title);
      Object.assign(step, { state: "running", attempt: event.attempt });
      delete step.durationMs;
      delete step.error;
      view.output.push({ kind: "heading", text: stepHeading(event.title, event.attempt) });
      break;
    }
    case "node.log":
      logged.add(`${event.nodeId}#${String(event.attempt)}`);
      view.output.push({ kind: "text", text: event.text });
      break;
    case "node.finished": {
      const { report } = event;
      Object.assign(stepOf(view, report.nodeId, report.title), stepUpdate(report));
      // Without live output (a journal fed only tails), the step's last lines still show.
      if (!logged.has(`${report.nodeId}#${String(report.attempt)}`) && report.outputTail)
        view.output.push({
          kind: "text",
          text: report.outputTail.endsWith("\n") ? report.outputTail : `${report.outputTail}\n`,
        });
      break;
    }
    case "commit.finished":
      view.commit = { ...(event.commitSha ? { sha: event.commitSha } : {}), changedFiles: event.changedFiles };
      break;
    case "push.finished":
      view.push = event.result;
      break;
    case "run.finished":
      view.report = event.report;
      for (const step of view.steps) if (step.state === "pending" && !step.onFailureOnly) step.state = "skipped";
      break;
    case "run.ended":
      for (const step of view.steps)
        if (step.state === "running") step.state = event.state === "cancelled" ? "cancelled" : "failed";
      break;
    case "sandbox.ready":
    case "node.output":
    case "node.progress":
      break;
  }
}

/** The fields of a step line a finished attempt sets (also sent live to the page). */
export function stepUpdate(
  report: NodeReport,
): Pick<StepView, "state" | "attempt"> & Partial<Pick<StepView, "durationMs" | "error" | "summary">> {
  return {
    state: report.status,
    attempt: report.attempt,
    durationMs: report.durationMs,
    ...(report.error ? { error: report.error } : {}),
    ...(report.summary ? { summary: report.summary } : {}),
  };
}

/** The line that opens a step's output in the pane. */
export function stepHeading(title: string, attempt: number): string {
  return `▶ ${title}${attempt > 1 ? ` (attempt ${String(attempt)})` : ""}\n`;
}

function stepOf(view: RunView, id: string, title: string): StepView {
  let step = view.steps.find((candidate) => candidate.id === id);
  if (!step) {
    step = { id, title, state: "pending", attempt: 1, onFailureOnly: false };
    view.steps.push(step);
  }
  return step;
}
