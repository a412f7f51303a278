import { randomBytes } from "node:crypto";
import type {
  CheckConclusion,
  CheckRunRecord,
  CheckStatus,
  CheckSuiteRecord,
  CommitStatusRecord,
  CommitStatusState,
  FakeGitHubState,
  JobRecord,
  RepoRecord,
  UserRecord,
  WorkflowRunRecord,
} from "./state.js";

/*
 * What CI does to a commit, in the fake: check suites and check runs (one suite per app per
 * commit, or per workflow run for GitHub Actions), commit statuses, and Actions workflow runs
 * whose jobs are check runs of GitHub Actions' app (a job's id is its check run's id, as on
 * GitHub). Suites and runs take their status and conclusion from their parts, so a test moves
 * one job and reads the consequences everywhere. Used by the test-facing methods in server.ts
 * and by the REST routes in rest-checks.ts / rest-actions.ts.
 */

/** GitHub Actions' app on github.com: its check suites, and the bot its events come from. */
export const ACTIONS_APP = {
  id: 15368,
  slug: "github-actions",
  name: "GitHub Actions",
  ownerLogin: "github",
  ownerId: 9919,
  botLogin: "github-actions[bot]",
  botId: 41898282,
} as const;

export function actionsBot(state: FakeGitHubState): UserRecord {
  return state.user(ACTIONS_APP.botLogin, "Bot", ACTIONS_APP.botId);
}

function aggregateStatus(parts: readonly { status: CheckStatus }[]): CheckStatus {
  if (parts.length === 0) return "queued";
  if (parts.every((p) => p.status === "completed")) return "completed";
  if (parts.every((p) => p.status === "queued")) return "queued";
  return "in_progress";
}

// guess: GitHub does not document how a suite's (or workflow run's) conclusion follows from its
// parts; the worst one wins, and neutral or skipped parts do not spoil a success.
const WORST_FIRST: readonly CheckConclusion[] = ["action_required", "failure", "timed_out", "cancelled"];

function aggregateConclusion(parts: readonly { conclusion: CheckConclusion | null }[]): CheckConclusion | null {
  const conclusions = parts.map((p) => p.conclusion);
  for (const bad of WORST_FIRST) if (conclusions.includes(bad)) return bad;
  if (conclusions.includes("success")) return "success";
  if (conclusions.includes("neutral")) return "neutral";
  return conclusions.length > 0 ? "skipped" : null;
}

/** The check runs that count now: the newest of each name in each suite (older ones were re-run). */
export function latestCheckRuns(runs: readonly CheckRunRecord[]): CheckRunRecord[] {
  const newest = new Map<string, CheckRunRecord>();
  for (const run of runs) {
    const key = `${String(run.suiteId)}\0${run.name}`;
    const seen = newest.get(key);
    if (!seen || seen.id < run.id) newest.set(key, run);
  }
  return runs.filter((run) => newest.get(`${String(run.suiteId)}\0${run.name}`) === run);
}

export function suiteRuns(state: FakeGitHubState, suite: CheckSuiteRecord): CheckRunRecord[] {
  return [...state.checkRuns.values()].filter((run) => run.suiteId === suite.id);
}

/** Brings a suite's status and conclusion in line with its latest check runs. */
export function refreshSuite(state: FakeGitHubState, suite: CheckSuiteRecord): void {
  const runs = latestCheckRuns(suiteRuns(state, suite));
  suite.status = aggregateStatus(runs);
  suite.conclusion = suite.status === "completed" ? aggregateConclusion(runs) : null;
  suite.updatedAt = state.nowIso();
}

export interface SuiteOptions {
  appId: number;
  headSha: string;
  headBranch?: string | null;
  before?: string | null;
  after?: string | null;
}

/** A new check suite (GitHub makes one per app per push; Actions one per workflow run). */
export function createSuite(state: FakeGitHubState, repo: RepoRecord, options: SuiteOptions): CheckSuiteRecord {
  const now = state.nowIso();
  const suite: CheckSuiteRecord = {
    id: state.nextId(),
    repoId: repo.id,
    appId: options.appId,
    headSha: options.headSha,
    headBranch: options.headBranch ?? null,
    status: "queued",
    conclusion: null,
    before: options.before ?? null,
    after: options.after ?? options.headSha,
    createdAt: now,
    updatedAt: now,
    rerequests: 0,
  };
  state.checkSuites.set(suite.id, suite);
  return suite;
}

export interface CheckRunOptions {
  headSha: string;
  name: string;
  /** A registered app's id; default GitHub Actions. */
  appId?: number;
  headBranch?: string | null;
  status?: CheckStatus;
  /** Implies `completed`. */
  conclusion?: CheckConclusion;
  output?: { title?: string | null; summary?: string | null; text?: string | null };
  detailsUrl?: string | null;
  externalId?: string | null;
  /** The suite to add it to; default the app's suite on that commit (created when missing). */
  suiteId?: number;
  /** Fixes the run's id (a job's check run shares the job's id). */
  id?: number;
  htmlUrl?: string;
}

export function addCheckRun(state: FakeGitHubState, repo: RepoRecord, options: CheckRunOptions): CheckRunRecord {
  const appId = options.appId ?? ACTIONS_APP.id;
  let suite = options.suiteId === undefined ? undefined : state.checkSuites.get(options.suiteId);
  if (options.suiteId !== undefined && !suite) throw new Error(`no check suite ${String(options.suiteId)}`);
  suite ??= [...state.checkSuites.values()].find(
    (s) => s.repoId === repo.id && s.appId === appId && s.headSha === options.headSha,
  );
  suite ??= createSuite(state, repo, {
    appId,
    headSha: options.headSha,
    ...(options.headBranch === undefined ? {} : { headBranch: options.headBranch }),
  });
  const now = state.nowIso();
  const status = options.conclusion === undefined ? (options.status ?? "queued") : "completed";
  const id = options.id ?? state.nextId();
  const run: CheckRunRecord = {
    id,
    repoId: repo.id,
    suiteId: suite.id,
    appId,
    headSha: options.headSha,
    name: options.name,
    status,
    conclusion: status === "completed" ? (options.conclusion ?? "success") : null,
    startedAt: status === "queued" ? null : now,
    completedAt: status === "completed" ? now : null,
    output: {
      title: options.output?.title ?? null,
      summary: options.output?.summary ?? null,
      text: options.output?.text ?? null,
    },
    detailsUrl:
      options.detailsUrl === undefined
        ? `${state.baseUrl}/${repo.owner}/${repo.name}/runs/${String(id)}`
        : options.detailsUrl,
    htmlUrl: options.htmlUrl ?? `${state.baseUrl}/${repo.owner}/${repo.name}/runs/${String(id)}`,
    externalId: options.externalId ?? null,
    rerequests: 0,
  };
  state.checkRuns.set(run.id, run);
  refreshSuite(state, suite);
  return run;
}

export interface CheckRunUpdate {
  status?: CheckStatus;
  conclusion?: CheckConclusion;
  output?: { title?: string | null; summary?: string | null; text?: string | null };
}

export function updateCheckRun(state: FakeGitHubState, run: CheckRunRecord, update: CheckRunUpdate): void {
  const now = state.nowIso();
  const status = update.conclusion === undefined ? (update.status ?? run.status) : "completed";
  if (status !== "queued") run.startedAt ??= now;
  if (status === "completed") {
    run.conclusion = update.conclusion ?? run.conclusion ?? "success";
    run.completedAt ??= now;
  } else {
    run.conclusion = null;
    run.completedAt = null;
  }
  run.status = status;
  if (update.output) run.output = { ...run.output, ...update.output };
  const suite = state.checkSuites.get(run.suiteId);
  if (suite) refreshSuite(state, suite);
}

// ---- commit statuses ----

export interface CommitStatusOptions {
  state: CommitStatusState;
  context?: string;
  description?: string | null;
  targetUrl?: string | null;
  /** Who set it; default the repository owner. */
  creator?: string;
}

export function addCommitStatus(
  state: FakeGitHubState,
  repo: RepoRecord,
  sha: string,
  options: CommitStatusOptions,
): CommitStatusRecord {
  const now = state.nowIso();
  const status: CommitStatusRecord = {
    id: state.nextId(),
    repoId: repo.id,
    sha,
    state: options.state,
    context: options.context ?? "default",
    description: options.description ?? null,
    targetUrl: options.targetUrl ?? null,
    creator: state.user(options.creator ?? repo.owner),
    createdAt: now,
    updatedAt: now,
  };
  state.commitStatuses.push(status);
  return status;
}

/** Every status on a commit, newest first, as GitHub lists them. */
export function statusesFor(state: FakeGitHubState, repo: RepoRecord, sha: string): CommitStatusRecord[] {
  return state.commitStatuses.filter((s) => s.repoId === repo.id && s.sha === sha).reverse();
}

/** The newest status of each context, and the combined state GitHub documents for them. */
export function combinedStatus(statuses: readonly CommitStatusRecord[]): {
  state: "failure" | "pending" | "success";
  latest: CommitStatusRecord[];
} {
  const latest: CommitStatusRecord[] = [];
  for (const status of statuses) if (!latest.some((s) => s.context === status.context)) latest.push(status);
  const state = latest.some((s) => s.state === "error" || s.state === "failure")
    ? "failure"
    : latest.length === 0 || latest.some((s) => s.state === "pending")
      ? "pending"
      : "success";
  return { state, latest };
}

// ---- GitHub Actions ----

export interface JobOptions {
  name: string;
  status?: CheckStatus;
  /** Implies `completed`. */
  conclusion?: CheckConclusion;
  /** The plain-text log; default a short one in GitHub's format. */
  log?: string;
  /** Step names; default checkout and the job's own step. */
  steps?: string[];
}

export interface WorkflowRunOptions {
  headSha: string;
  headBranch?: string | null;
  /** Default `CI`. */
  name?: string;
  /** Default `.github/workflows/ci.yml`. */
  path?: string;
  /** Default `push`. */
  event?: string;
  /** Who pushed; default the repository owner. */
  actor?: string;
  jobs: JobOptions[];
}

export function jobHtmlUrl(state: FakeGitHubState, repo: RepoRecord, job: JobRecord): string {
  return `${state.baseUrl}/${repo.owner}/${repo.name}/actions/runs/${String(job.runId)}/job/${String(job.id)}`;
}

function defaultLog(state: FakeGitHubState, name: string, steps: readonly string[], failed: boolean): string {
  const at = new Date(state.now()).toISOString().replace("Z", "0000Z");
  const lines = steps.flatMap((step) => [`${at} ##[group]Run ${step}`, `${at} ${name}: ${step}`, `${at} ##[endgroup]`]);
  if (failed) lines.push(`${at} ##[error]Process completed with exit code 1.`);
  return `${lines.join("\n")}\n`;
}

function createJob(state: FakeGitHubState, repo: RepoRecord, run: WorkflowRunRecord, options: JobOptions): JobRecord {
  const now = state.nowIso();
  const status = options.conclusion === undefined ? (options.status ?? "queued") : "completed";
  const conclusion = status === "completed" ? (options.conclusion ?? "success") : null;
  const stepNames = options.steps ?? ["actions/checkout@v4", options.name];
  const job: JobRecord = {
    id: state.nextId(),
    runId: run.id,
    repoId: repo.id,
    runAttempt: run.runAttempt,
    name: options.name,
    status,
    conclusion,
    createdAt: now,
    startedAt: now,
    completedAt: status === "completed" ? now : null,
    steps: stepNames.map((name, index) => ({ name, number: index + 1, status, conclusion })),
    log: options.log ?? defaultLog(state, options.name, stepNames, conclusion === "failure"),
  };
  state.jobs.set(job.id, job);
  const url = jobHtmlUrl(state, repo, job);
  addCheckRun(state, repo, {
    id: job.id,
    appId: ACTIONS_APP.id,
    suiteId: run.suiteId,
    headSha: run.headSha,
    headBranch: run.headBranch,
    name: job.name,
    status,
    ...(conclusion === null ? {} : { conclusion }),
    // Actions fills the output only when something failed; the title names the problem.
    output:
      conclusion === "failure" ? { title: `${job.name} failed`, summary: "Process completed with exit code 1." } : {},
    detailsUrl: url,
    htmlUrl: url,
  });
  return job;
}

/** The jobs of the run's newest attempt: re-run ones replace their earlier attempt, the rest carry over. */
export function latestJobs(state: FakeGitHubState, run: WorkflowRunRecord): JobRecord[] {
  const newest = new Map<string, JobRecord>();
  for (const job of state.jobs.values()) {
    if (job.runId !== run.id) continue;
    const seen = newest.get(job.name);
    if (!seen || seen.runAttempt < job.runAttempt) newest.set(job.name, job);
  }
  return [...newest.values()].sort((a, b) => a.id - b.id);
}

function refreshWorkflowRun(state: FakeGitHubState, run: WorkflowRunRecord): void {
  const jobs = latestJobs(state, run);
  const current = jobs.filter((job) => job.runAttempt === run.runAttempt);
  // A new attempt is queued until one of its own jobs starts, whatever it carried over.
  run.status = current.every((job) => job.status === "queued") ? "queued" : aggregateStatus(jobs);
  run.conclusion = run.status === "completed" ? aggregateConclusion(jobs) : null;
  run.updatedAt = state.nowIso();
}

export function addWorkflowRun(
  state: FakeGitHubState,
  repo: RepoRecord,
  options: WorkflowRunOptions,
): { run: WorkflowRunRecord; jobs: JobRecord[] } {
  const path = options.path ?? ".github/workflows/ci.yml";
  const sameWorkflow = [...state.workflowRuns.values()].filter((r) => r.repoId === repo.id && r.path === path);
  const suite = createSuite(state, repo, {
    appId: ACTIONS_APP.id,
    headSha: options.headSha,
    headBranch: options.headBranch ?? null,
  });
  const now = state.nowIso();
  const actor = state.user(options.actor ?? repo.owner);
  const run: WorkflowRunRecord = {
    id: state.nextId(),
    repoId: repo.id,
    workflowId: sameWorkflow[0]?.workflowId ?? state.nextId(),
    name: options.name ?? "CI",
    path,
    event: options.event ?? "push",
    headSha: options.headSha,
    headBranch: options.headBranch ?? null,
    runNumber: sameWorkflow.length + 1,
    runAttempt: 1,
    status: "queued",
    conclusion: null,
    suiteId: suite.id,
    actor,
    triggeringActor: actor,
    createdAt: now,
    updatedAt: now,
    runStartedAt: now,
  };
  state.workflowRuns.set(run.id, run);
  const jobs = options.jobs.map((job) => createJob(state, repo, run, job));
  refreshWorkflowRun(state, run);
  return { run, jobs };
}

/** Moves a job (and so its check run, check suite and workflow run) on. */
export function updateJob(
  state: FakeGitHubState,
  job: JobRecord,
  update: { status?: CheckStatus; conclusion?: CheckConclusion; log?: string },
): void {
  const status = update.conclusion === undefined ? (update.status ?? job.status) : "completed";
  job.status = status;
  job.conclusion = status === "completed" ? (update.conclusion ?? job.conclusion ?? "success") : null;
  job.completedAt = status === "completed" ? (job.completedAt ?? state.nowIso()) : null;
  for (const step of job.steps) {
    step.status = status;
    step.conclusion = job.conclusion;
  }
  if (update.log !== undefined) job.log = update.log;
  else if (job.conclusion === "failure" && !job.log.includes("##[error]")) {
    job.log = defaultLog(
      state,
      job.name,
      job.steps.map((s) => s.name),
      true,
    );
  }
  const checkRun = state.checkRuns.get(job.id);
  if (checkRun) {
    updateCheckRun(state, checkRun, {
      status,
      ...(job.conclusion === null ? {} : { conclusion: job.conclusion }),
      ...(job.conclusion === "failure"
        ? { output: { title: `${job.name} failed`, summary: "Process completed with exit code 1." } }
        : {}),
    });
  }
  const run = state.workflowRuns.get(job.runId);
  if (run) refreshWorkflowRun(state, run);
}

/**
 * A new attempt of `run` re-running `names` (its other jobs carry over): new job ids and check
 * runs in the same suite, everything queued again, as GitHub's re-run does.
 */
export function rerunJobs(
  state: FakeGitHubState,
  repo: RepoRecord,
  run: WorkflowRunRecord,
  names: string[],
): JobRecord[] {
  run.runAttempt += 1;
  run.runStartedAt = state.nowIso();
  const rerun = names.map((name) => createJob(state, repo, run, { name }));
  const suite = state.checkSuites.get(run.suiteId);
  if (suite) {
    suite.status = "queued";
    suite.conclusion = null;
  }
  refreshWorkflowRun(state, run);
  return rerun;
}

/** A one-minute download link for a job's log, like GitHub's signed blob-storage URLs. */
export function logLink(state: FakeGitHubState, job: JobRecord): string {
  const token = randomBytes(16).toString("hex");
  state.logLinks.set(token, { jobId: job.id, expiresAt: state.now() + 60_000 });
  return `${state.baseUrl}${LOG_DOWNLOAD_PREFIX}${String(job.id)}?sig=${token}`;
}

/** Where the fake serves job logs outside the API, as GitHub serves them from another host. */
export const LOG_DOWNLOAD_PREFIX = "/_fake-actions-logs/jobs/";

/** The log behind a download link, or undefined for a link that is unknown, expired or for another job. */
export function logFor(state: FakeGitHubState, pathname: string, sig: string | null): string | undefined {
  if (!pathname.startsWith(LOG_DOWNLOAD_PREFIX) || sig === null) return undefined;
  const link = state.logLinks.get(sig);
  const jobId = Number(pathname.slice(LOG_DOWNLOAD_PREFIX.length));
  if (!link || link.jobId !== jobId || link.expiresAt <= state.now()) return undefined;
  return state.jobs.get(jobId)?.log;
}
