import { randomUUID } from "node:crypto";
import type { ConfigCapableOctokit } from "../../config/load-repo-config.js";
import { loadRepoConfig } from "../../config/load-repo-config.js";
import { RepoConfigError, type RepoConfig } from "../../config/repo-config.js";
import { rerunFailedJobs } from "../../github/checks.js";
import { describeGitHubError } from "../../github/errors.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { branchHead } from "../../github/repository.js";
import { pullRequestState } from "../../github/reviews.js";
import type { EnqueueOutcome } from "../../runs/queue/port.js";
import type { RunRequest } from "../../runs/request.js";
import type { Log } from "../../util/log.js";
import type { CiCheck } from "../ci/checks.js";
import { classifyAll, classifyFailure } from "../ci/classify.js";
import type { CiWatch, PullRequestLedger, TrackedPull } from "../ledger/port.js";
import { showCiState } from "./ci-section.js";
import { commitChecks, failingLogs } from "./commit-checks.js";
import { SCAN_LIMIT, WATCHING } from "./nudge.js";

export interface CiWatcherDeps {
  pulls: PullRequestLedger;
  installationOctokit(installationId: number): Promise<OctokitLike & ConfigCapableOctokit>;
  /** The run queue: a fix round is a run like any other (journaled, one per pull request at a time). */
  enqueue(request: RunRequest): Promise<EnqueueOutcome>;
  /** This app's id: its own check runs are never CI to react to. */
  appId: number;
  newRunId(): string;
  now(): Date;
  log: Log;
  /** First wait between two looks at a commit's checks, in ms; it doubles up to `maxPollMs`. */
  pollMs?: number;
  maxPollMs?: number;
  /** A look holds a pull request this long, so workers sharing the store do not all ask GitHub. */
  claimMs?: number;
  /** With no check at all this long after the push, the commit has no CI: the loop ends. */
  noChecksMs?: number;
  /** Pull requests looked at concurrently per tick. */
  concurrency?: number;
}

/**
 * Watches the checks on the commits Harness pushed, and moves each pull request's CI loop on:
 * passed → ✅; failed and flaky → its failed jobs re-run once; failed for real → a fix run
 * queued (at most `ci.fix_attempts` rounds, within `max_rounds`); no result in time → ⌛.
 * Webhooks (`check_suite`, `check_run`, `status`) only bring the next look forward; the look
 * itself asks GitHub, so a missed or forged delivery changes nothing but its timing. Its whole
 * state is the ledger's: a restarted worker picks up where the last one was.
 */
export class CiWatcher {
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<number> | undefined;
  private readonly configs = new Map<string, { config: RepoConfig; at: number }>();

  constructor(private readonly deps: CiWatcherDeps) {}

  /** Looks at due pull requests every `intervalMs` until `stop`. */
  start(intervalMs = 10_000): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      void this.once();
    }, intervalMs);
    this.timer.unref();
  }

  /** A tick, or the one already under way: ticks never overlap. */
  once(): Promise<number> {
    this.ticking ??= this.tick().finally(() => {
      this.ticking = undefined;
    });
    return this.ticking;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.ticking;
  }

  /** One pass: every followed, open pull request whose CI is due for a look. Never throws; answers how many. */
  async tick(): Promise<number> {
    let due: TrackedPull[];
    try {
      const now = this.deps.now().getTime();
      due = (await this.deps.pulls.list({ outcome: "open", limit: SCAN_LIMIT })).filter(
        (pull) => pull.ci !== undefined && isDue(pull.ci, now),
      );
    } catch (error) {
      this.deps.log.warn({ err: describeGitHubError(error) }, "could not list the pull requests whose CI is watched");
      return 0;
    }
    const concurrency = this.deps.concurrency ?? 4;
    for (let index = 0; index < due.length; index += concurrency)
      await Promise.all(due.slice(index, index + concurrency).map((pull) => this.look(pull)));
    return due.length;
  }

  private async look(pull: TrackedPull): Promise<void> {
    const claimed = await this.claim(pull);
    if (!claimed?.ci) return;
    try {
      await this.evaluate(claimed, claimed.ci);
    } catch (error) {
      // GitHub failing is a reason to look again later, not to end the loop.
      this.deps.log.warn(
        {
          err: describeGitHubError(error),
          pull: `${claimed.repo.owner}/${claimed.repo.name}#${String(claimed.number)}`,
        },
        "could not look at a pull request's checks; looking again later",
      );
      // …unless its deadline has passed: a loop GitHub never answers for must still end.
      if (this.deps.now().getTime() >= Date.parse(claimed.ci.deadline)) {
        const octokit = await this.deps.installationOctokit(claimed.installationId).catch(() => undefined);
        const ended: CiWatch = { ...claimed.ci, phase: "timed_out", reason: "GitHub did not answer about the checks" };
        if (octokit) await this.show(octokit, claimed, ended);
        await this.write(claimed, () => ended);
        return;
      }
      await this.write(claimed, (ci) => ({ ...ci, ...this.later(ci) }));
    }
  }

  private async claim(pull: TrackedPull): Promise<TrackedPull | undefined> {
    const now = this.deps.now();
    const until = new Date(now.getTime() + (this.deps.claimMs ?? 60_000)).toISOString();
    // The token, not the time, says whose claim it is: two watchers may read the same millisecond.
    const token = randomUUID();
    const claimed = await this.deps.pulls.update(pull.repo.id, pull.number, (current) => {
      const ci = current.ci;
      if (!ci || !isDue(ci, now.getTime()) || current.outcome !== undefined) return undefined;
      return { ...current, ci: { ...ci, checkingUntil: until, checkingBy: token } };
    });
    return claimed?.ci?.checkingBy === token ? claimed : undefined;
  }

  private async evaluate(pull: TrackedPull, ci: CiWatch): Promise<void> {
    const octokit = await this.deps.installationOctokit(pull.installationId);
    const repo = { owner: pull.repo.owner, name: pull.repo.name };
    // A stop needs no config: an invalid file must not keep a stopped loop alive.
    if (ci.stopRequested !== undefined) return this.end(octokit, pull, { phase: "stopped", reason: ci.stopRequested });
    let config: RepoConfig;
    try {
      config = await this.config(octokit, pull);
    } catch (error) {
      if (!(error instanceof RepoConfigError)) throw error;
      return this.end(octokit, pull, { phase: "stopped", reason: ".github/harness.yml is invalid" });
    }
    if (!config.ci.enabled)
      return this.end(octokit, pull, { phase: "stopped", reason: "`ci` is off in .github/harness.yml" });

    let verdict;
    try {
      verdict = await commitChecks(octokit, repo, ci.sha, this.deps.appId);
    } catch (error) {
      // An installation that never accepted the Checks and Commit statuses permissions: said
      // once, in the status comment, instead of a loop that waits in silence until its deadline.
      if (!notPermitted(error)) throw error;
      return this.end(octokit, pull, {
        phase: "stopped",
        reason:
          "Harness may not read this repository's checks: an owner can grant Checks and Commit statuses (read) " +
          "by accepting the app's new permissions in the installation's settings",
      });
    }
    const now = this.deps.now();
    if (verdict.state === "pending" || verdict.state === "none") {
      if (now.getTime() >= Date.parse(ci.deadline)) return this.end(octokit, pull, { phase: "timed_out" });
      if (verdict.state === "none" && now.getTime() - Date.parse(ci.since) >= (this.deps.noChecksMs ?? 10 * 60_000))
        return this.end(octokit, pull, { phase: "no_checks" });
      return this.write(pull, (current) => ({ ...current, ...this.later(current) }));
    }

    // A settled verdict is acted on only for the commit at the head of the pull request now.
    const state = await pullRequestState(octokit, repo, pull.number);
    if (state.state !== "open")
      return this.end(octokit, pull, { phase: "stopped", reason: "the pull request was closed" });
    if (state.headSha !== ci.sha) {
      // Harness's own newer push (its run is about to watch that commit) is no one else's.
      if (await pushedByHarness(octokit, repo, state.headRef))
        return this.write(pull, (current) => ({ ...current, ...this.later(current) }));
      return this.end(octokit, pull, {
        phase: "stopped",
        reason: `someone else pushed to the branch (\`${state.headSha.slice(0, 7)}\`); Harness does not build over it`,
      });
    }
    if (verdict.state === "passed") return this.end(octokit, pull, { phase: "passed" });

    const failing = verdict.failing;
    const logs = await failingLogs(octokit, repo, failing);
    const shown = failing.map((check) => ({ name: check.name, ...(check.url ? { url: check.url } : {}) }));
    const failure = {
      kind: classifyAll(failing, logs),
      reason: failing[0] ? classifyFailure(failing[0], logs.get(failing[0].id)).reason : "",
    };
    if (failure.kind === "flaky" && config.ci.rerun_flaky && ci.rerunSha !== ci.sha) {
      const rerun = await this.rerun(octokit, repo, failing);
      if (rerun) {
        await this.show(octokit, pull, { ...ci, phase: "rerun", failing: shown, reason: failure.reason });
        return this.write(pull, (current) => ({
          ...current,
          phase: "rerun",
          rerunSha: current.sha,
          failing: shown,
          reason: failure.reason,
          polls: 0,
          nextCheckAt: new Date(now.getTime() + (this.deps.pollMs ?? 60_000)).toISOString(),
        }));
      }
    }
    const roundsLeft = ci.fixRounds < config.ci.fix_attempts && pull.rounds < config.max_rounds;
    if (!roundsLeft)
      return this.end(octokit, pull, {
        phase: "gave_up",
        failing: shown,
        // Out of fix rounds says itself ("after n fix rounds"); the pull request's cap does not.
        ...(ci.fixRounds >= config.ci.fix_attempts
          ? {}
          : { reason: `the pull request's ${String(config.max_rounds)} automatic rounds (max_rounds) are used` }),
      });
    await this.fix(octokit, pull, ci, shown);
  }

  /** Queues the next fix round (one per commit and round, whatever races), and shows it. */
  private async fix(
    octokit: OctokitLike,
    pull: TrackedPull,
    ci: CiWatch,
    failing: { name: string; url?: string }[],
  ): Promise<void> {
    const round = ci.fixRounds + 1;
    const runId = this.deps.newRunId();
    const repository = await octokit.request("GET /repos/{owner}/{repo}", {
      owner: pull.repo.owner,
      repo: pull.repo.name,
    });
    const data = repository.data as { html_url: string; default_branch: string };
    const names = failing.map((check) => check.name).slice(0, 5);
    const request: RunRequest = {
      runId,
      key: `${String(pull.repo.id)}:ci:${ci.sha}:${String(round)}`,
      deliveryId: `ci-${ci.sha}-${String(round)}`,
      installationId: pull.installationId,
      repo: {
        id: pull.repo.id,
        owner: pull.repo.owner,
        name: pull.repo.name,
        htmlUrl: data.html_url,
        defaultBranch: data.default_branch,
      },
      issue: {
        number: pull.number,
        title: `CI on #${String(pull.number)}`,
        body: "",
        htmlUrl: pull.url,
        pullRequest: { headRef: pull.headRef },
      },
      trigger: { kind: "ci", sha: ci.sha, round },
      requester: { login: "harness", id: 0 },
      intent: `Fix the failing checks: ${names.join(", ")}`,
      intentTrusted: true,
      ...(pull.statusCommentId !== undefined ? { statusCommentId: pull.statusCommentId } : {}),
      requestedAt: this.deps.now().toISOString(),
    };
    // The round is recorded before it is queued: a worker may start the run at once, and it
    // only goes ahead on a loop that says `fixing` (counted once per round, whatever raced).
    const recorded = await this.deps.pulls.update(pull.repo.id, pull.number, (current) => {
      if (current.ci?.sha !== ci.sha || current.ci.fixRounds >= round) return undefined;
      const rest: CiWatch = { ...current.ci, phase: "fixing", fixRounds: round, failing, fixRunId: runId };
      delete rest.checkingUntil;
      delete rest.checkingBy;
      return { ...current, rounds: current.rounds + 1, ci: rest };
    });
    if (recorded?.ci?.fixRunId !== runId) return;
    const outcome = await this.deps.enqueue(request).catch((error: unknown) => {
      this.deps.log.warn({ err: describeGitHubError(error) }, "could not queue a CI fix round");
      return undefined;
    });
    if (!outcome || outcome.status === "refused") {
      // The queue is full or failing: the round is handed back, and the loop looks again later.
      await this.deps.pulls.update(pull.repo.id, pull.number, (current) => {
        if (current.ci?.fixRunId !== runId || current.ci.phase !== "fixing") return undefined;
        const back: CiWatch = { ...current.ci, phase: "waiting", fixRounds: round - 1, ...this.later(current.ci) };
        delete back.fixRunId;
        return { ...current, rounds: Math.max(0, current.rounds - 1), ci: back };
      });
      return;
    }
    if (outcome.status === "duplicate") {
      const queued = outcome.runId;
      await this.deps.pulls.update(pull.repo.id, pull.number, (current) =>
        current.ci?.fixRunId === runId ? { ...current, ci: { ...current.ci, fixRunId: queued } } : undefined,
      );
    }
    await this.show(octokit, pull, { ...ci, phase: "fixing", fixRounds: round, failing });
  }

  private async rerun(
    octokit: OctokitLike,
    repo: { owner: string; name: string },
    failing: readonly CiCheck[],
  ): Promise<boolean> {
    const jobs = failing.map((check) => check.actionsJobId).filter((id): id is number => id !== undefined);
    // Only GitHub Actions jobs can be re-run by the app; a flaky failure elsewhere needs a fix or a person.
    if (jobs.length === 0 || jobs.length !== failing.length) return false;
    const results = await Promise.all(jobs.map((job) => rerunFailedJobs(octokit, repo, job)));
    if (results.includes("forbidden"))
      this.deps.log.info({}, "could not re-run failed jobs: the installation lacks Actions: write");
    return results.some((result) => result === "rerun");
  }

  /** Ends the loop in `change.phase` and shows it. */
  private async end(
    octokit: OctokitLike,
    pull: TrackedPull,
    change: Partial<CiWatch> & { phase: CiWatch["phase"] },
  ): Promise<void> {
    const ci = pull.ci;
    if (!ci) return;
    await this.show(octokit, pull, { ...ci, ...change });
    await this.write(pull, (current) => {
      const ended: CiWatch = { ...current, ...change };
      delete ended.stopRequested;
      return ended;
    });
  }

  /** Writes the loop's state back (releasing the claim), unless a newer push replaced it. */
  private async write(pull: TrackedPull, change: (ci: CiWatch) => CiWatch): Promise<void> {
    const sha = pull.ci?.sha;
    await this.deps.pulls.update(pull.repo.id, pull.number, (current) => {
      if (!current.ci || current.ci.sha !== sha) return undefined;
      const next = change(current.ci);
      delete next.checkingUntil;
      delete next.checkingBy;
      return { ...current, ci: next };
    });
  }

  private async show(octokit: OctokitLike, pull: TrackedPull, ci: CiWatch): Promise<void> {
    const config = this.configs.get(String(pull.repo.id))?.config;
    await showCiState(octokit, pull, ci, config?.ci.fix_attempts, this.deps.log, config?.ci.timeout_minutes);
  }

  /** The next look, backing off: first after `pollMs`, then twice as long each time, up to `maxPollMs`. */
  private later(ci: CiWatch): Pick<CiWatch, "polls" | "nextCheckAt"> {
    const base = this.deps.pollMs ?? 60_000;
    const wait = Math.min(base * 2 ** Math.min(ci.polls, 10), this.deps.maxPollMs ?? 10 * 60_000);
    return { polls: ci.polls + 1, nextCheckAt: new Date(this.deps.now().getTime() + wait).toISOString() };
  }

  private async config(octokit: ConfigCapableOctokit, pull: TrackedPull): Promise<RepoConfig> {
    const key = String(pull.repo.id);
    const cached = this.configs.get(key);
    const now = this.deps.now().getTime();
    // Looks at one commit are a minute or more apart: a shorter life would read the file on every look.
    if (cached && now - cached.at < CONFIG_TTL_MS) return cached.config;
    const config = await loadRepoConfig(octokit, pull.repo.owner, pull.repo.name);
    if (this.configs.size > 1_000) this.configs.clear();
    this.configs.set(key, { config, at: now });
    return config;
  }
}

/** How long a repository's config is reused by the watcher; a change to `ci` takes effect within it. */
const CONFIG_TTL_MS = 20 * 60_000;

function isDue(ci: CiWatch, now: number): boolean {
  if (ci.checkingUntil !== undefined && Date.parse(ci.checkingUntil) > now) return false;
  if (ci.stopRequested !== undefined && (WATCHING.has(ci.phase) || ci.phase === "fixing")) return true;
  return WATCHING.has(ci.phase) && Date.parse(ci.nextCheckAt) <= now;
}

/** Whether the branch's head commit was written by a Harness run (it carries a `Harness-Run` trailer). */
async function pushedByHarness(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  branch: string,
): Promise<boolean> {
  const { message } = await branchHead(octokit, repo, branch);
  return /^Harness-Run: \S+\s*$/m.test(message);
}

/** GitHub's answer to an installation token without the permission (not a rate limit, also a 403). */
function notPermitted(error: unknown): boolean {
  const { status, message } = (error ?? {}) as { status?: unknown; message?: unknown };
  return status === 403 && typeof message === "string" && /not accessible by integration/i.test(message);
}
