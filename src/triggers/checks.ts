import { z } from "zod";
import { showCiState } from "../pulls/watch/ci-section.js";
import { nudgeCiWatch, stopCiWatch, WATCHING } from "../pulls/watch/nudge.js";
import { issueKeyOf } from "../runs/request.js";
import { guard, type HandlerDeps, type WebhookContext } from "./context.js";

const app = z.object({ id: z.number() }).loose().nullable().optional();
const pullRefs = z.array(z.object({ number: z.number() }).loose()).default([]);
const repository = z.object({ id: z.number() }).loose();

const checkSuiteCompleted = z.object({
  action: z.literal("completed"),
  check_suite: z.object({ head_sha: z.string(), app, pull_requests: pullRefs }).loose(),
  repository,
});
const checkRunCompleted = z.object({
  action: z.literal("completed"),
  check_run: z.object({ head_sha: z.string(), app, pull_requests: pullRefs }).loose(),
  repository,
});
const statusEvent = z.object({ sha: z.string(), state: z.string(), repository });
const synchronize = z.object({
  action: z.literal("synchronize"),
  pull_request: z.object({ number: z.number(), head: z.object({ sha: z.string() }).loose() }).loose(),
  sender: z.object({ login: z.string(), type: z.string().default("User") }).loose(),
  repository,
});

/*
 * Deliveries about the checks on a commit. They only bring the CI watcher's next look at that
 * commit forward: what the checks say is always read from GitHub, so a delivery that is missed,
 * late or forged changes when Harness looks, never what it decides. None costs a GitHub request.
 */

/** `check_suite.completed` and `check_run.completed`: another app's checks on a commit finished. */
export async function onCheckCompleted(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const suite = checkSuiteCompleted.safeParse(context.payload);
  const run = suite.success ? undefined : checkRunCompleted.safeParse(context.payload);
  const check = suite.success ? suite.data.check_suite : run?.success ? run.data.check_run : undefined;
  const repoId = suite.success ? suite.data.repository.id : run?.success ? run.data.repository.id : undefined;
  const pulls = deps.pulls;
  if (!check || repoId === undefined || !pulls) return;
  // Harness's own check runs are never CI to react to.
  if (deps.appId !== undefined && check.app?.id === deps.appId) return;
  await guard(context, async () => {
    await nudgeCiWatch(pulls, deps.now(), {
      repoId,
      sha: check.head_sha,
      pullNumbers: check.pull_requests.map((pull) => pull.number),
    });
  });
}

/** `status`: a commit status changed; a pending one settles nothing. */
export async function onCommitStatus(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const parsed = statusEvent.safeParse(context.payload);
  const pulls = deps.pulls;
  if (!parsed.success || !pulls || parsed.data.state === "pending") return;
  const { sha, repository: repo } = parsed.data;
  await guard(context, async () => {
    await nudgeCiWatch(pulls, deps.now(), { repoId: repo.id, sha });
  });
}

/**
 * `pull_request.synchronize`: someone pushed to a pull request Harness follows. Harness's own
 * pushes aside, its CI loop stops there — and a fix round under way is cancelled — so it never
 * builds over, or races, a person's commits.
 */
export async function onPullRequestPushed(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const parsed = synchronize.safeParse(context.payload);
  const pulls = deps.pulls;
  if (!parsed.success || !pulls) return;
  const { pull_request: pull, sender, repository: repo } = parsed.data;
  await guard(context, async () => {
    const botLogin = await deps.botLogin?.();
    if (botLogin !== undefined && sender.login.toLowerCase() === botLogin.toLowerCase()) return;
    const followed = await pulls.get(repo.id, pull.number);
    if (!followed?.ci || followed.ci.sha === pull.head.sha) return;
    const fixing = followed.ci.phase === "fixing";
    const short = pull.head.sha.slice(0, 7);
    const why = `@${sender.login} pushed to the branch (\`${short}\`); Harness does not build over it`;
    if (!(await stopCiWatch(pulls, repo.id, pull.number, why, deps.now()))) return;
    if (fixing) await deps.queue.cancel(issueKeyOf(repo.id, pull.number));
    context.log.info({ pull: pull.number, sender: sender.login }, "stopped the CI loop: someone else pushed");
  });
}

const closed = z.object({
  action: z.literal("closed"),
  pull_request: z.object({ number: z.number(), merged: z.boolean().nullable().optional() }).loose(),
  repository,
});

/**
 * `pull_request.closed`: a CI loop going on the pull request ends (a fix round under way is
 * cancelled), and its CI line says why, so a merged pull request does not keep "waiting".
 */
export async function onPullRequestClosedCi(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const parsed = closed.safeParse(context.payload);
  const pulls = deps.pulls;
  if (!parsed.success || !pulls) return;
  const { pull_request: pull, repository: repo } = parsed.data;
  await guard(context, async () => {
    const followed = await pulls.get(repo.id, pull.number);
    const ci = followed?.ci;
    if (!followed || !ci || !(WATCHING.has(ci.phase) || ci.phase === "fixing")) return;
    const reason = pull.merged === true ? "the pull request was merged" : "the pull request was closed";
    const ended = await pulls.update(repo.id, pull.number, (current) =>
      current.ci?.sha === ci.sha ? { ...current, ci: { ...current.ci, phase: "stopped", reason } } : undefined,
    );
    if (ci.phase === "fixing") await deps.queue.cancel(issueKeyOf(repo.id, pull.number));
    if (ended?.ci) await showCiState(context.octokit, ended, ended.ci, undefined, context.log);
  });
}
