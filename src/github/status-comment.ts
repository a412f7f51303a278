import { formatTokens } from "../util/token-count.js";
import { redact } from "../util/redact.js";
import { fence, fitComment, MAX_INLINE_PATCH_CHARS, oneLine } from "./comment-text.js";
import { neutralText } from "./neutral-text.js";
import { formatDuration } from "../util/duration.js";
import { utcTime } from "./rate-limit-gate.js";

/** Where a run is, as the status comment shows it. */
export type RunPhase =
  | "queued"
  | "waiting"
  | "running"
  | "succeeded"
  | "no_changes"
  | "failed"
  | "timed_out"
  | "cancelled"
  | "interrupted"
  | "paused";

export type StepState = "pending" | "running" | "succeeded" | "failed" | "timed_out" | "cancelled" | "skipped";

export interface StepView {
  id: string;
  title: string;
  state: StepState;
  attempt: number;
  durationMs?: number;
  /** Steps that run only when another fails (e.g. fix rounds) are listed once they run. */
  onFailureOnly?: boolean;
  /** What a running agent step is doing now ("editing `src/x.ts`"). */
  activity?: string;
}

/** Everything the status comment shows. Strings are redacted again when rendered. */
export interface StatusView {
  runId: string;
  phase: RunPhase;
  requester: string;
  intent: string;
  agent?: string;
  sandbox?: string;
  blueprint?: string;
  steps: StepView[];
  /** A line under the heading (e.g. "Queued behind the run for …"). */
  note?: string;
  /**
   * Epoch ms until which the run's GitHub requests wait for the installation's rate limit (its
   * budget spent, or a secondary limit's back-off); absent when they do not wait.
   */
  rateLimitUntil?: number | undefined;
  durationMs?: number;
  prUrl?: string;
  prNumber?: number;
  prReused?: boolean;
  /** The run follows up on a pull request (a command or review on it): it pushes there, opening nothing. */
  followUp?: boolean;
  /** The pull request was opened ready for review because the repository does not offer drafts. */
  draftUnavailable?: boolean;
  changedFiles?: number;
  costUsd?: number;
  /** Some of `costUsd` is Harness's estimate from tokens (a CLI reported no cost): shown as `≈$0.42`. */
  costEstimated?: boolean;
  turns?: number;
  /** Every model token the agents used (input, output and the prompt cache's). */
  tokens?: number;
  error?: string;
  remedy?: string;
  diffstat?: string;
  patch?: string;
  runUrl?: string;
  /** A run paused at its money budget: what it spent of what it was allowed, and how to go on. */
  paused?: PausedView;
}

export interface PausedView {
  spentUsd: number;
  limitUsd: number;
  /** The repository's command (`/harness`). */
  command?: string;
  /** Epoch ms at which an unanswered pause ends the run. */
  until?: number;
}

/** Hidden marker that lets a restarted worker find its comment again instead of posting a second. */
export function statusMarker(runId: string): string {
  return `<!-- harness:run=${runId} -->`;
}

export function runIdFromComment(body: string): string | undefined {
  return /<!-- harness:run=([A-Za-z0-9_-]+) -->/.exec(body)?.[1];
}

const HEADINGS: Record<RunPhase, string> = {
  queued: "👀 Harness heard you — queued",
  waiting: "⏳ Harness is waiting for the previous run on this issue",
  running: "🛠️ Harness is working on it",
  succeeded: "✅ Harness opened a pull request",
  no_changes: "➖ Harness finished without changes",
  failed: "❌ Harness could not finish",
  timed_out: "❌ Harness ran out of time",
  cancelled: "⏹ Harness run cancelled",
  interrupted: "❌ Harness was interrupted",
  paused: "⏸ Harness paused at its budget",
};

const STEP_MARK: Record<StepState, string> = {
  pending: "⬜",
  running: "⏳",
  succeeded: "✅",
  failed: "❌",
  timed_out: "⌛",
  cancelled: "⏹",
  skipped: "➖",
};

/** Renders the status comment's markdown. Pure: the same view always renders the same text. */
export function renderStatusComment(view: StatusView): string {
  // A follow-up adds to a pull request that is already open: "opened" would be untrue.
  const heading =
    view.phase === "succeeded" && view.followUp ? "✅ Harness pushed to the pull request" : HEADINGS[view.phase];
  const lines: string[] = [statusMarker(view.runId), `### ${heading}`, ""];
  lines.push(`> ${neutralText(oneLine(view.intent, 300))}`, `> — requested by @${view.requester}`, "");
  if (view.note) lines.push(view.note, "");
  if (view.rateLimitUntil !== undefined)
    lines.push(`⏳ Waiting for GitHub's rate limit on this installation until ${utcTime(view.rateLimitUntil)}`, "");

  if (view.phase === "succeeded" && view.prUrl) {
    const facts = [
      view.prReused ? `Updated ${view.prUrl}` : `**${view.prUrl}**`,
      view.changedFiles !== undefined
        ? `${String(view.changedFiles)} file${view.changedFiles === 1 ? "" : "s"} changed`
        : undefined,
      view.durationMs !== undefined ? formatDuration(view.durationMs) : undefined,
      view.turns !== undefined ? `${String(view.turns)} agent turn${view.turns === 1 ? "" : "s"}` : undefined,
      view.tokens !== undefined ? `${formatTokens(view.tokens)} tokens` : undefined,
      view.costUsd !== undefined ? `${view.costEstimated ? "≈" : ""}$${view.costUsd.toFixed(2)}` : undefined,
    ].filter((fact): fact is string => fact !== undefined);
    lines.push(facts.join(" · "), "");
    if (view.draftUnavailable && !view.prReused) {
      lines.push(
        "Opened ready for review, not as a draft: this repository's plan does not offer draft pull requests " +
          "(GitHub has them on private repositories only with Team and Enterprise).",
        "",
      );
    }
  }

  const steps = view.steps.filter((step) => !step.onFailureOnly || step.state !== "pending");
  if (steps.length > 0) {
    for (const step of steps) {
      const attempt = step.attempt > 1 ? ` (attempt ${String(step.attempt)})` : "";
      const time =
        step.durationMs !== undefined
          ? ` — ${formatDuration(step.durationMs)}`
          : step.state === "running"
            ? ` — ${step.activity !== undefined ? neutralText(oneLine(step.activity, 120)) : "running"}`
            : "";
      lines.push(`- ${STEP_MARK[step.state]} ${neutralText(step.title)}${attempt}${time}`);
    }
    lines.push("");
  }

  if (view.phase === "paused" && view.paused) {
    const { spentUsd, limitUsd, until } = view.paused;
    const command = view.paused.command ?? "/harness";
    lines.push(
      `⏸ paused at $${spentUsd.toFixed(2)} of $${limitUsd.toFixed(2)} — ` +
        `\`${command} continue [+$N]\` or \`${command} stop\``,
      "",
      `The agent's session and its work so far are kept: \`${command} continue +5\` allows $5 more and goes on ` +
        `where it stopped (\`${command} continue\` alone allows the same again).` +
        (until !== undefined ? ` Unanswered, the run ends at ${utcTime(until)} with its work kept below.` : ""),
      "",
    );
  } else if (view.error && view.phase !== "succeeded") {
    lines.push(`**What happened:** ${neutralText(oneLine(view.error, 500))}`);
    if (view.remedy) lines.push(`**What to do:** ${neutralText(oneLine(view.remedy, 500))}`);
    lines.push("");
  }
  if (view.diffstat) {
    lines.push(
      "<details><summary>The change is kept here (diffstat)</summary>",
      "",
      fence(view.diffstat.slice(0, 4000)),
      "",
      "</details>",
      "",
    );
  }
  if (view.patch && view.patch.length <= MAX_INLINE_PATCH_CHARS) {
    lines.push(
      "<details><summary>Patch (apply with <code>git am</code>)</summary>",
      "",
      fence(view.patch, "diff"),
      "",
      "</details>",
      "",
    );
  }

  const footer = [
    view.agent ? `Agent: ${view.agent}` : undefined,
    view.sandbox ? `Sandbox: ${view.sandbox}` : undefined,
    view.blueprint ? `Blueprint: ${view.blueprint}` : undefined,
    view.runUrl ? `[Run page](${view.runUrl})` : `Run \`${view.runId}\``,
  ].filter((part): part is string => part !== undefined);
  lines.push(`<sub>${footer.join(" · ")}</sub>`);

  const body = redact(lines.join("\n"));
  return fitComment(body);
}

/** The help reply for `/harness help` and a bare `/harness`. */
export function renderHelp(command: string, label: string, permission: string): string {
  return [
    "**Harness** turns a request into a pull request.",
    "",
    `- \`${command} <what should change>\` — start a run on this issue ` +
      `(or push follow-up commits on this pull request)`,
    `- \`${command} cancel\` — stop the active run on this issue (or end a paused one, keeping its work)`,
    `- \`${command} continue [+N]\` — go on with a run paused at its money budget, allowed $N more ` +
      `(without an amount, its own allowance again)`,
    `- \`${command} approve\` — run a request from someone without ${permission} access (maintainers only)`,
    `- add the \`${label}\` label — run with the issue's title and body as the request`,
    "",
    `Only people with **${permission}** access (or more) can start runs. Settings live in \`.github/harness.yml\`.`,
  ].join("\n");
}
