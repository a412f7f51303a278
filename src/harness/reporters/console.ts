import type { HarnessEvent, Reporter } from "../../contracts/events.js";
import { totalTokens, type NodeReport } from "../../contracts/types.js";
import { formatDuration } from "../../util/duration.js";

export interface ConsoleReporterOptions {
  /** Where to write; `process.stderr` by default so stdout stays for machine-readable output. */
  stream?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** Live mode (spinner, elapsed time, last output line). Defaults to whether the stream is a TTY. */
  live?: boolean;
  /** Clock, injectable for tests. */
  now?: () => number;
}

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const FRAME_MS = 100;

/**
 * Shows a run's progress in a terminal. On a TTY: one live line per running node with a
 * spinner, the elapsed time and its latest output line, replaced by ✔/✖ when it finishes.
 * Elsewhere (CI logs, pipes): plain lines, one per event that matters.
 */
export class ConsoleReporter implements Reporter {
  private readonly stream: NonNullable<ConsoleReporterOptions["stream"]>;
  private readonly live: boolean;
  private readonly now: () => number;
  private running: { label: string; startedAt: number; lastLine: string } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private frame = 0;

  constructor(options: ConsoleReporterOptions = {}) {
    this.stream = options.stream ?? process.stderr;
    this.live = options.live ?? this.stream.isTTY === true;
    this.now = options.now ?? Date.now;
  }

  emit(event: HarnessEvent): void {
    switch (event.type) {
      case "run.started":
        this.line(`harness run ${event.runId}: ${event.repo} → ${event.branch} (blueprint ${event.blueprint})`);
        break;
      case "node.started": {
        const label = `${event.title}${event.attempt > 1 ? ` (attempt ${String(event.attempt)})` : ""}`;
        this.running = { label, startedAt: this.now(), lastLine: "" };
        if (this.live) this.startSpinner();
        else this.line(`▶ ${label}`);
        break;
      }
      case "node.output":
        if (this.running) this.running.lastLine = lastLine(event.tail);
        break;
      case "node.finished": {
        this.stopSpinner();
        const { report } = event;
        const label = `${report.title}${report.attempt > 1 ? ` (attempt ${String(report.attempt)})` : ""}`;
        const mark = report.status === "succeeded" ? "✔" : report.status === "skipped" ? "–" : "✖";
        const extra = report.status === "succeeded" ? "" : ` — ${report.error ?? report.status}`;
        this.line(`${mark} ${label} ${formatDuration(report.durationMs)}${extra}`);
        if (report.status !== "succeeded" && report.outputTail) {
          for (const text of report.outputTail.split("\n").slice(-15)) this.line(`    ${text}`);
        }
        this.running = undefined;
        break;
      }
      case "commit.finished":
        this.line(
          event.commitSha
            ? `✔ Committed ${String(event.changedFiles)} file(s) as ${event.commitSha.slice(0, 12)}`
            : "– No changes to commit",
        );
        break;
      case "push.finished":
        if (event.result.pushed && event.result.prUrl) this.line(`✔ Pull request: ${event.result.prUrl}`);
        else if (event.result.pushed) this.line(`✖ Pushed, but ${event.result.error ?? "no pull request was opened"}`);
        else this.line(`✖ ${event.result.error ?? "push failed"}`);
        break;
      case "run.finished":
        this.stopSpinner();
        this.line(
          `${event.report.status === "succeeded" ? "✔" : "✖"} Run ${event.report.status} ` +
            `in ${formatDuration(event.report.durationMs)}${event.report.error ? `: ${event.report.error}` : ""}`,
        );
        {
          const spent = agentSpend(event.report.nodes);
          if (spent) this.line(`  agents: ${spent}`);
        }
        break;
      case "run.notice":
        this.stopSpinner();
        this.line(`! ${event.text}`);
        if (this.live && this.running) this.startSpinner();
        break;
      case "sandbox.ready":
        break;
    }
  }

  close(): Promise<void> {
    this.stopSpinner();
    return Promise.resolve();
  }

  private startSpinner(): void {
    this.stopSpinner();
    this.draw();
    this.timer = setInterval(() => {
      this.draw();
    }, FRAME_MS);
    this.timer.unref();
  }

  private stopSpinner(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.live && this.running) this.stream.write("\r\x1b[2K");
  }

  private draw(): void {
    if (!this.running) return;
    this.frame = (this.frame + 1) % SPINNER.length;
    const elapsed = formatDuration(this.now() - this.running.startedAt);
    const head = `${SPINNER[this.frame] ?? ""} ${this.running.label} ${elapsed}`;
    const width = Math.max(20, (this.stream.columns ?? 100) - 1);
    const tail = this.running.lastLine ? `  ${this.running.lastLine}` : "";
    this.stream.write(`\r\x1b[2K${(head + tail).slice(0, width)}`);
  }

  private line(text: string): void {
    this.stream.write(`${text}\n`);
  }
}

function lastLine(text: string): string {
  const lines = text
    // eslint-disable-next-line no-control-regex -- stripping ANSI escapes is the point
    .replace(/\x1b\[[0-9;]*[A-Za-z]/g, "")
    .split(/\r?\n|\r/)
    .filter((line) => line.trim() !== "");
  return lines.at(-1)?.trim() ?? "";
}

/**
 * What the run's agent steps used, as the status comment says it: turns, every token, and the
 * cost (`≈` where Harness priced tokens a CLI reported no cost for). Empty without agent steps.
 */
export function agentSpend(nodes: readonly NodeReport[]): string {
  const agents = nodes.filter((node) => node.kind === "agent");
  if (agents.length === 0) return "";
  const turns = agents.reduce((sum, node) => sum + (node.turns ?? 0), 0);
  const tokens = agents.reduce((sum, node) => sum + (node.tokens ? totalTokens(node.tokens) : 0), 0);
  const priced = agents.filter((node) => node.costUsd !== undefined);
  const cost = priced.reduce((sum, node) => sum + (node.costUsd ?? 0), 0);
  const estimated = priced.some((node) => node.costEstimated === true);
  return [
    turns > 0 ? `${String(turns)} turn${turns === 1 ? "" : "s"}` : undefined,
    tokens > 0 ? `${tokens.toLocaleString("en")} tokens` : undefined,
    priced.length > 0 ? `${estimated ? "≈" : ""}$${cost.toFixed(2)}` : "cost unknown",
  ]
    .filter((part): part is string => part !== undefined)
    .join(" · ");
}
