import type { PullOutcome } from "../pulls/ledger/port.js";
import type { RunSummary } from "../runs/journal/port.js";
import type { Redactor } from "../util/redact.js";
import { formatTime, runDuration, STATE_LABELS } from "./format.js";
import { html, layout, safeHref, type SafeHtml } from "./html.js";

const INTENT_CHARS = 120;

/** What became of a run's pull request, as `/runs?outcome=` filters by it. */
export type PullFilter = PullOutcome | "open";

export const PULL_FILTERS: readonly PullFilter[] = ["merged", "closed", "open"];

const HEADINGS: Readonly<Record<PullFilter, string>> = {
  merged: "Runs whose pull request was merged",
  closed: "Runs whose pull request was closed without merge",
  open: "Runs whose pull request is open",
};

export interface RunListOptions {
  now: Date;
  redactor: Redactor;
  viewer: string;
  /** The cursor of the next page: a run id, or a ledger position when filtered. */
  olderThan?: string;
  /** The filter this page shows. */
  outcome?: PullFilter;
  /** Whether to offer the outcome filters (only when the server keeps a pull-request ledger). */
  filters?: boolean;
}

/** Recent runs the viewer may see, newest first, with a link to older ones. */
export function runListPage(runs: readonly RunSummary[], options: RunListOptions): SafeHtml {
  const older = options.olderThan
    ? `/runs?${new URLSearchParams({
        ...(options.outcome ? { outcome: options.outcome } : {}),
        before: options.olderThan,
      }).toString()}`
    : undefined;
  const body = html`
<p class="crumbs">Signed in as ${options.viewer}. Runs of repositories you can read.</p>
<h1>${options.outcome ? HEADINGS[options.outcome] : "Recent runs"}</h1>
${options.filters ? filterLinks(options.outcome) : ""}
${
  runs.length === 0
    ? html`<p class="empty">No runs to show.
        Runs appear here when someone asks Harness for a change on a repository you can read.</p>`
    : html`<table class="runs">
<thead><tr><th>State</th><th>Repository</th><th>Issue</th><th>Intent</th><th>Requested by</th><th>Queued</th>
<th>Duration</th><th>Pull request</th></tr></thead>
<tbody>
${runs.map((run) => row(run, options))}
</tbody>
</table>`
}
${older ? html`<p class="more"><a href="${older}">Older runs →</a></p>` : ""}`;
  return layout({ title: options.outcome ? HEADINGS[options.outcome] : "Runs", body });
}

/** All · Merged · Closed · Open, the current one as text rather than a link. */
function filterLinks(current: PullFilter | undefined): SafeHtml {
  const links: Array<[PullFilter | undefined, string]> = [
    [undefined, "All"],
    ["merged", "Merged"],
    ["closed", "Closed"],
    ["open", "Open"],
  ];
  return html`<p class="filters" id="pull-filters">Pull request: ${links.map(([filter, label], index) => {
    const separator = index > 0 ? " · " : "";
    if (filter === current) return html`${separator}<strong aria-current="page">${label}</strong>`;
    return html`${separator}<a href="${filter ? `/runs?outcome=${filter}` : "/runs"}">${label}</a>`;
  })}</p>`;
}

function row(run: RunSummary, options: { now: Date; redactor: Redactor }): SafeHtml {
  const intent = options.redactor(run.intent).replace(/\s+/g, " ").trim();
  const short = intent.length > INTENT_CHARS ? `${intent.slice(0, INTENT_CHARS - 1)}…` : intent;
  const issue = safeHref(run.issue.url);
  const pr = safeHref(run.prUrl);
  const page = `/runs/${encodeURIComponent(run.runId)}`;
  return html`<tr data-run="${run.runId}">
<td><a href="${page}" class="badge state-${run.state}">${STATE_LABELS[run.state]}</a></td>
<td>${run.repo.owner}/${run.repo.name}</td>
<td>${issue ? html`<a href="${issue}">#${String(run.issue.number)}</a>` : `#${String(run.issue.number)}`}</td>
<td><a href="${page}">${short}</a></td>
<td>${run.requester}</td>
<td><time datetime="${run.createdAt}">${formatTime(run.createdAt)}</time></td>
<td>${runDuration(run, options.now)}</td>
<td>${pr ? html`<a href="${pr}">${pullNumber(pr)}</a>` : ""}</td>
</tr>
`;
}

function pullNumber(url: string): string {
  const match = /\/pull\/(\d+)/.exec(url);
  return match ? `#${match[1] ?? ""}` : "open";
}
