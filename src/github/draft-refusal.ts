// No Octokit import here: the error is read by shape, so any client's HTTP error will do.

const DRAFTS_UNSUPPORTED = /draft pull requests are not supported/i;

/**
 * Whether GitHub refused to open a pull request as a draft because the repository's plan does
 * not offer drafts (private repositories on Free and Pro). GitHub answers 422 in two shapes:
 * the reason as the top-level `message`, or `"Validation Failed"` with the reason as the
 * `message` of an entry in `errors`. Any other 422 (a duplicate, no commits, a bad head) is not
 * a draft refusal, and opening ready for review would not help it.
 */
export function isDraftRefusal(error: unknown): boolean {
  if (error === null || typeof error !== "object" || !("status" in error) || error.status !== 422) return false;
  return reasonsOf(error).some((reason) => DRAFTS_UNSUPPORTED.test(reason));
}

/** GitHub's own words: the body's message and each of its errors, or the error's message without a body. */
function reasonsOf(error: object): string[] {
  const data = "response" in error ? (error.response as { data?: unknown } | undefined)?.data : undefined;
  if (data === null || typeof data !== "object") return error instanceof Error ? [error.message] : [];
  const body = data as { message?: unknown; errors?: unknown };
  const reasons = typeof body.message === "string" ? [body.message] : [];
  if (Array.isArray(body.errors)) {
    for (const entry of body.errors as unknown[]) {
      const message = (entry as { message?: unknown } | null)?.message;
      if (typeof message === "string") reasons.push(message);
    }
  }
  return reasons;
}
