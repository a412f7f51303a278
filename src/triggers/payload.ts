import { z } from "zod";

/**
 * The parts of GitHub's `issue_comment.created` and `issues.labeled` payloads the app uses,
 * validated so a malformed or unexpected payload is ignored with a log line, never a crash.
 */
export const user = z.object({ login: z.string(), id: z.number(), type: z.string().default("User") });
export const repository = z.object({
  id: z.number(),
  name: z.string(),
  full_name: z.string(),
  owner: z.object({ login: z.string() }),
  html_url: z.string(),
  default_branch: z.string().default("main"),
  private: z.boolean().default(false),
});
const issue = z.object({
  number: z.number(),
  title: z.string(),
  body: z.string().nullable().optional(),
  html_url: z.string(),
  /** Who wrote the issue; null for a deleted account. */
  user: user.nullable().optional(),
  pull_request: z.object({ url: z.string().optional() }).loose().optional(),
});

const issueComment = z.object({
  action: z.literal("created"),
  issue,
  comment: z.object({
    id: z.number(),
    body: z
      .string()
      .nullable()
      .transform((body) => body ?? ""),
    /**
     * Null when the author's account is gone (GitHub's webhook description allows it). The
     * command is still handled: whoever asks is the delivery's `sender`, which is what is
     * authorised, so a missing author changes nothing but the bot check.
     */
    user: user.nullable(),
    performed_via_github_app: z.object({ id: z.number() }).loose().nullable().optional(),
  }),
  repository,
  sender: user,
  installation: z.object({ id: z.number() }).optional(),
});

const issuesLabeled = z.object({
  action: z.literal("labeled"),
  issue,
  label: z.object({ name: z.string() }).optional(),
  repository,
  sender: user,
  installation: z.object({ id: z.number() }).optional(),
});

export type IssueCommentEvent = z.infer<typeof issueComment>;
export type IssuesLabeledEvent = z.infer<typeof issuesLabeled>;

export function parseIssueComment(payload: unknown): IssueCommentEvent | undefined {
  const parsed = issueComment.safeParse(payload);
  return parsed.success ? parsed.data : undefined;
}

/** Where a payload departs from what the app reads (paths and kinds only: values may be a stranger's text). */
export function payloadProblem(payload: unknown, kind: "issue_comment" | "issues"): string | undefined {
  const parsed = (kind === "issue_comment" ? issueComment : issuesLabeled).safeParse(payload);
  if (parsed.success) return undefined;
  return parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.map(String).join(".") || "payload"}: ${issue.code}`)
    .join("; ");
}

export function parseIssuesLabeled(payload: unknown): IssuesLabeledEvent | undefined {
  const parsed = issuesLabeled.safeParse(payload);
  return parsed.success ? parsed.data : undefined;
}
