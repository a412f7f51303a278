import { z } from "zod";
import type { PullRequestLedger, TrackedPull } from "../pulls/ledger/port.js";
import { pullOutcome, pullReopened } from "../pulls/outcome.js";
import { describeError } from "../util/errors.js";
import type { WebhookContext } from "./context.js";

export interface PullOutcomeDeps {
  pulls: PullRequestLedger;
  /** Told once per outcome recorded (not on a redelivery): the metrics. */
  onOutcome?: (pull: TrackedPull) => void;
  /** For a payload that names no close time. */
  now?: () => Date;
}

/**
 * The parts of `pull_request.closed` and `pull_request.reopened` this reads. Everything but the
 * identity is optional: a payload missing a time still closes the record, with the best time known.
 */
const pullRequestEvent = z.object({
  action: z.enum(["closed", "reopened"]),
  pull_request: z.object({
    number: z.number().int(),
    merged: z.boolean().nullable().optional(),
    merged_at: z.string().nullable().optional(),
    closed_at: z.string().nullable().optional(),
  }),
  repository: z.object({ id: z.number().int() }),
});

type PullRequestEvent = z.infer<typeof pullRequestEvent>;

/**
 * `pull_request.closed`: records whether a pull request Harness follows was merged or closed
 * unmerged. Pull requests Harness does not follow cost one ledger read and nothing else — no
 * GitHub call at all, whatever the payload.
 */
export async function onPullRequestClosed(context: WebhookContext, deps: PullOutcomeDeps): Promise<void> {
  const event = parse(context, "closed");
  if (!event) return;
  const { number, merged, merged_at: mergedAt, closed_at: closedAt } = event.pull_request;
  const closing = {
    // `merged` is absent from some payload shapes; a merge time says the same.
    merged: merged === true || ((merged === undefined || merged === null) && typeof mergedAt === "string"),
    closedAt: closedAt ?? mergedAt ?? (deps.now ?? (() => new Date()))().toISOString(),
    mergedAt: mergedAt ?? null,
  };
  await guarded(context, event, async () => {
    // `update` may run the change more than once; the last run is the one stored.
    let recorded: TrackedPull | undefined;
    const stored = await deps.pulls.update(event.repository.id, number, (pull) => {
      recorded = pullOutcome(pull, closing);
      return recorded;
    });
    if (!stored || !recorded) return;
    context.log.info(
      { repoId: event.repository.id, pull: number, outcome: stored.outcome },
      "recorded what became of a pull request",
    );
    deps.onOutcome?.(stored);
  });
}

/** `pull_request.reopened`: the pull request is open again, so its next close counts. */
export async function onPullRequestReopened(context: WebhookContext, deps: PullOutcomeDeps): Promise<void> {
  const event = parse(context, "reopened");
  if (!event) return;
  await guarded(context, event, async () => {
    await deps.pulls.update(event.repository.id, event.pull_request.number, pullReopened);
  });
}

function parse(context: WebhookContext, action: PullRequestEvent["action"]): PullRequestEvent | undefined {
  const parsed = pullRequestEvent.safeParse(context.payload);
  if (parsed.success && parsed.data.action === action) return parsed.data;
  if ((context.payload as { action?: unknown } | null)?.action === action)
    context.log.warn(
      // Paths and kinds only: values may be a stranger's text.
      {
        problem: parsed.error?.issues
          .slice(0, 3)
          .map((issue) => `${issue.path.map(String).join(".")}: ${issue.code}`)
          .join("; "),
      },
      "ignored an unreadable pull request event",
    );
  return undefined;
}

/**
 * A ledger that does not answer is logged, never thrown: a thrown error would reach GitHub's
 * delivery log as a 500 with its text, and GitHub does not retry it anyway.
 */
async function guarded(context: WebhookContext, event: PullRequestEvent, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    context.log.error(
      {
        err: describeError(error),
        delivery: context.id,
        repoId: event.repository.id,
        pull: event.pull_request.number,
      },
      `could not record the pull request's ${event.action === "closed" ? "outcome" : "reopening"}`,
    );
  }
}
