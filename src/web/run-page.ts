import type { AuditDetailValue, AuditRecord } from "../audit/audit-log.js";
import type { TrackedPull } from "../pulls/ledger/port.js";
import { isTerminal, type RunSummary } from "../runs/journal/port.js";
import { totalTokens } from "../contracts/types.js";
import type { Redactor } from "../util/redact.js";
import { formatTokens } from "../util/token-count.js";
import { ansiSegments } from "./ansi.js";
import { formatBytes, formatDuration, formatTime, repoUrl, runDuration, STATE_LABELS } from "./format.js";
import { html, layout, safeHref, type SafeHtml } from "./html.js";
import type { OutputPiece, RunView, StepView } from "./run-view.js";

/**
 * The page of one run: what was asked, how it ended (PR or classified error), the blueprint's
 * steps with states and timings, and the output. Complete without JavaScript; with it, the
 * script follows the run live from `data-after` (the last entry rendered here).
 *
 * `audit`, when the server keeps an audit trail, is the run's entries (who asked, who approved,
 * tokens minted, pushes, the PR), or "unavailable" when the trail could not be read.
 *
 * `pull`, when the server keeps a pull-request ledger and this run opened the PR, is what became
 * of it (open, merged, closed), or "unavailable" when the ledger could not be read.
 */
export function runPage(
  summary: RunSummary,
  view: RunView,
  options: {
    now: Date;
    redactor: Redactor;
    viewer: string;
    audit?: readonly AuditRecord[] | "unavailable";
    pull?: TrackedPull | "unavailable";
  },
): SafeHtml {
  const { redactor } = options;
  const live = !isTerminal(summary.state);
  const repo = `${summary.repo.owner}/${summary.repo.name}`;
  const body = html`
<p class="crumbs"><a href="/runs">All runs</a> · signed in as ${options.viewer}</p>
<section class="run-head">
  <h1><span class="badge state-${summary.state}"
    id="run-state">${STATE_LABELS[summary.state]}</span> <span class="intent">${redactor(summary.intent)}</span></h1>
  <dl class="facts">
    <dt>Repository</dt><dd>${link(repoUrl(summary), repo)}</dd>
    <dt>Issue</dt><dd>${link(summary.issue.url, `#${String(summary.issue.number)}`)}</dd>
    <dt>Requested by</dt><dd>${summary.requester}</dd>
    ${view.blueprint ? html`<dt>Blueprint</dt><dd>${view.blueprint}</dd>` : ""}
    ${view.branch ? html`<dt>Branch</dt><dd><code>${view.branch}</code></dd>` : ""}
    <dt>Queued</dt><dd>${time(summary.createdAt)}</dd>
    ${summary.startedAt ? html`<dt>Started</dt><dd>${time(summary.startedAt)}</dd>` : ""}
    ${summary.finishedAt ? html`<dt>Finished</dt><dd>${time(summary.finishedAt)}</dd>` : ""}
    <dt>Duration</dt><dd id="run-duration">${runDuration(summary, options.now) || "not started"}</dd>
    <dt>Run</dt><dd><code>${summary.runId}</code></dd>
  </dl>
</section>
<section id="outcome" class="outcome outcome-${summary.state}"${live ? html` hidden` : ""}>
${outcome(summary, view, redactor, options.pull)}
</section>
<section class="steps-section">
  <h2>Steps</h2>
  ${
    view.steps.length === 0
      ? html`<p class="muted" id="no-steps">${
          live ? "The steps appear when the run starts." : "The run ended before its steps started."
        }</p>`
      : ""
  }
  <ol class="steps" id="steps">${view.steps.map((step) => stepItem(step, redactor))}</ol>
</section>
${options.audit !== undefined ? auditSection(options.audit, redactor) : ""}
<section class="output-section">
  <h2>Output</h2>
  ${
    summary.outputDroppedBytes > 0
      ? html`<p class="muted">The first ${formatBytes(summary.outputDroppedBytes)} of output were dropped:
          a run keeps the last part of its output.</p>`
      : ""
  }
  <pre class="log" id="output" tabindex="0">${renderOutput(view.output, redactor)}</pre>
  ${
    live
      ? html`<p class="muted" id="live-note">This run is still going: new output appears here as it comes
          (reload the page if JavaScript is off).</p>`
      : ""
  }
</section>`;
  return layout({
    title: `${repo}#${String(summary.issue.number)} ${STATE_LABELS[summary.state]}`,
    body,
    script: live,
    data: {
      run: summary.runId,
      after: String(summary.lastSeq),
      live: live ? "true" : "false",
      ...(live && summary.startedAt ? { started: summary.startedAt } : {}),
    },
  });
}

function outcome(
  summary: RunSummary,
  view: RunView,
  redactor: Redactor,
  pull: TrackedPull | "unavailable" | undefined,
): SafeHtml {
  const report = view.report;
  const summaries =
    report?.nodes.filter((node) => node.kind === "agent" && node.summary).map((node) => node.summary ?? "") ?? [];
  const agentSummary = summaries.at(-1);
  const turns = report?.nodes.reduce((sum, node) => sum + (node.turns ?? 0), 0) ?? 0;
  const cost = report?.nodes.reduce((sum, node) => sum + (node.costUsd ?? 0), 0) ?? 0;
  const estimated = report?.nodes.some((node) => node.costEstimated === true) ?? false;
  const tokens = report?.nodes.reduce((sum, node) => sum + (node.tokens ? totalTokens(node.tokens) : 0), 0) ?? 0;
  const pr = safeHref(summary.prUrl);
  return html`
<h2>Outcome</h2>
${pr ? html`<p class="pr">Pull request: <a id="pr-link" href="${pr}">${summary.prUrl ?? ""}</a></p>` : ""}
${pr && pull ? pullState(pull) : ""}
${
  summary.error
    ? html`<div class="error"><p><strong>${
        summary.errorKind ? `${kindLabel(summary.errorKind)}: ` : ""
      }</strong><span id="run-error">${redactor(summary.error)}</span></p>${
        summary.remedy ? html`<p class="remedy">What to do: ${redactor(summary.remedy)}</p>` : ""
      }</div>`
    : ""
}
${agentSummary ? html`<p class="summary"><strong>The agent says:</strong> ${redactor(agentSummary)}</p>` : ""}
${
  view.commit
    ? html`<p>${
        view.commit.sha
          ? html`Committed ${String(view.commit.changedFiles)} changed file(s)
              as <code>${view.commit.sha.slice(0, 12)}</code>.`
          : "No file changed."
      }</p>`
    : ""
}
${
  turns > 0 || cost > 0 || tokens > 0
    ? html`<p class="muted" id="agent-usage">${[
        turns > 0 ? `${String(turns)} agent turns` : "",
        tokens > 0 ? `${formatTokens(tokens)} tokens` : "",
        cost > 0 ? `${estimated ? "≈" : ""}$${cost.toFixed(2)}` : "",
      ]
        .filter((part) => part !== "")
        .join(" · ")}</p>`
    : ""
}
${
  view.push?.diffstat
    ? html`<details><summary>The change that was kept (diffstat)</summary>
        <pre class="log">${redactor(view.push.diffstat)}</pre></details>`
    : ""
}
${
  view.push?.patch
    ? html`<details><summary>The change as a patch</summary>
        <pre class="log">${redactor(view.push.patch)}</pre></details>`
    : ""
}
${!summary.error && !pr && !report ? html`<p class="muted">The run ended.</p>` : ""}`;
}

/** What became of the pull request the run opened, and how many follow-up rounds it took. */
function pullState(pull: TrackedPull | "unavailable"): SafeHtml {
  if (pull === "unavailable")
    return html`<p class="muted" id="pr-outcome">What became of the pull request could not be read just now.</p>`;
  const rounds =
    pull.rounds === 0 ? "no follow-up rounds" : `${String(pull.rounds)} follow-up round${pull.rounds === 1 ? "" : "s"}`;
  let state: SafeHtml;
  if (pull.outcome === "merged")
    state = html`Merged${
      pull.secondsToMerge !== undefined ? ` ${formatWait(pull.secondsToMerge)} after it was opened` : ""
    }${pull.closedAt ? html` (${time(pull.closedAt)})` : ""}`;
  else if (pull.outcome === "closed")
    state = html`Closed without merge${pull.closedAt ? html` (${time(pull.closedAt)})` : ""}`;
  else state = html`Open`;
  return html`<p class="pr-outcome" id="pr-outcome" data-outcome="${pull.outcome ?? "open"}">${state} · ${rounds}</p>`;
}

/** "under a minute", "25 min", "3 h 05 min", "4 d 2 h": a review's pace, not a stopwatch's. */
function formatWait(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 60) return "under a minute";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${String(minutes)} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${String(hours)} h ${String(minutes % 60).padStart(2, "0")} min`;
  return `${String(Math.floor(hours / 24))} d ${String(hours % 24)} h`;
}

function auditSection(entries: readonly AuditRecord[] | "unavailable", redactor: Redactor): SafeHtml {
  let content: SafeHtml;
  if (entries === "unavailable")
    content = html`<p class="muted">The audit trail could not be read just now; reload the page to try again.</p>`;
  else if (entries.length === 0) content = html`<p class="muted">No audit entries for this run yet.</p>`;
  else
    content = html`<table class="audit">
      <thead><tr><th>Time</th><th>Action</th><th>Actor</th><th>Details</th></tr></thead>
      <tbody>${entries.map((entry) => auditRow(entry, redactor))}</tbody></table>`;
  return html`<section class="audit-section" id="audit">
  <h2>Audit</h2>
  ${content}
</section>`;
}

function auditRow(entry: AuditRecord, redactor: Redactor): SafeHtml {
  const details: Array<[string, AuditDetailValue]> = [
    ...(entry.requestId !== undefined ? [["request", entry.requestId] as [string, AuditDetailValue]] : []),
    ...Object.entries(entry.details ?? {}),
  ];
  return html`<tr data-seq="${entry.seq}">
    <td><time datetime="${entry.at}">${auditTime(entry.at)}</time></td>
    <td><code>${redactor(entry.action)}</code></td>
    <td>${entry.actor !== undefined ? redactor(entry.actor) : ""}</td>
    <td>${
      details.length > 0
        ? html`<ul class="audit-details">${details.map(
            ([key, value]) =>
              html`<li><span class="muted">${redactor(key)}:</span> ${redactor(detailText(value))}</li>`,
          )}</ul>`
        : ""
    }</td></tr>`;
}

function detailText(value: AuditDetailValue): string {
  return Array.isArray(value) ? value.join(", ") : String(value);
}

/** To the second: an audit trail orders things that happen within the same minute. */
function auditTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

function stepItem(step: StepView, redactor: Redactor): SafeHtml {
  const state = html`<span class="step-state">${step.state.replace("_", " ")}</span>`;
  const title = html`<span class="step-title">${step.title}</span>`;
  const attempt = html`<span class="step-attempt">${
    step.attempt > 1 ? ` (attempt ${String(step.attempt)})` : ""
  }</span>`;
  const duration = html`<span class="step-duration">${
    step.durationMs !== undefined ? formatDuration(step.durationMs) : ""
  }</span>`;
  const error = html`<div class="step-error">${step.error ? redactor(step.error) : ""}</div>`;
  return html`<li class="step" data-step="${step.id}" data-state="${step.state}"${
    step.onFailureOnly ? html` data-on-failure-only="true"` : ""
  }>${state} ${title}${attempt} ${duration}${error}</li>`;
}

/** Output as escaped text in styled spans: ANSI colours become classes, nothing else survives. */
export function renderOutput(pieces: readonly OutputPiece[], redactor: Redactor): SafeHtml {
  return html`${pieces.map((piece) =>
    piece.kind === "heading" ? html`<span class="log-step">${piece.text}</span>` : segmentsHtml(redactor(piece.text)),
  )}`;
}

function segmentsHtml(text: string): SafeHtml {
  return html`${ansiSegments(text).map(([className, segment]) =>
    className ? html`<span class="${className}">${segment}</span>` : segment,
  )}`;
}

function link(url: string | undefined, text: string): SafeHtml {
  const href = safeHref(url);
  return href ? html`<a href="${href}">${text}</a>` : html`${text}`;
}

function time(iso: string): SafeHtml {
  return html`<time datetime="${iso}">${formatTime(iso)}</time>`;
}

const KIND_LABELS: Record<string, string> = {
  timed_out: "Timed out",
  no_changes: "No changes",
  step_failed: "A step failed",
  interrupted: "Interrupted",
  pull_request: "Pull request failed",
};

function kindLabel(kind: string): string {
  return KIND_LABELS[kind] ?? `Push failed (${kind.replace(/_/g, " ")})`;
}
