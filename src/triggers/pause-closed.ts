import { z } from "zod";
import { endPausedRun } from "../runs/paused/end-paused.js";
import { issueKeyOf } from "../runs/request.js";
import { guard, type HandlerDeps, type WebhookContext } from "./context.js";

const closedEvent = z
  .object({
    action: z.literal("closed"),
    issue: z.object({ number: z.number().int() }).loose().optional(),
    pull_request: z.object({ number: z.number().int() }).loose().optional(),
    repository: z.object({ id: z.number().int() }).loose(),
  })
  .loose();

/**
 * `issues.closed` and `pull_request.closed`: a run paused on that issue or pull request waits for
 * nobody any more. It ends with its work kept in its status comment, and its sandbox is let go.
 * An issue or pull request with no paused run costs one store read and no GitHub call.
 */
export async function onClosedWhilePaused(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const store = deps.paused;
  const parsed = closedEvent.safeParse(context.payload);
  if (!store || !parsed.success) return;
  const number = parsed.data.pull_request?.number ?? parsed.data.issue?.number;
  if (number === undefined) return;
  const key = issueKeyOf(parsed.data.repository.id, number);
  await guard(context, async () => {
    const paused = await store.forIssue(key);
    if (!paused) return;
    const by = `closed:${key}`;
    if (paused.state !== "paused" && !(paused.state === "ending" && paused.claimedBy === by)) return;
    const run = await store.claim(paused.runId, { state: "ending", by });
    if (!run) return;
    const what = parsed.data.pull_request ? "pull request" : "issue";
    await endPausedRun(store, context.octokit, run, `Ended: the ${what} was closed while the run was paused`);
    context.log.info({ runId: run.runId }, `a paused run ended: its ${what} was closed`);
  });
}
