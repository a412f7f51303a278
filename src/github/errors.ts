// No Octokit import here: the engine reports GitHub failures without depending on a client.

/** A GitHub API failure as one readable line: status and GitHub's own message. */
export function describeGitHubError(error: unknown): string {
  if (error !== null && typeof error === "object" && "status" in error && typeof error.status === "number") {
    const response =
      "response" in error
        ? (error.response as { data?: { message?: unknown; errors?: Array<{ message?: unknown }> } } | undefined)
        : undefined;
    const message =
      typeof response?.data?.message === "string"
        ? response.data.message
        : error instanceof Error
          ? error.message
          : "request failed";
    const detail = response?.data?.errors
      ?.map((item) => (typeof item.message === "string" ? item.message : ""))
      .filter(Boolean)
      .join("; ");
    return `GitHub API ${String(error.status)}: ${message}${detail ? ` (${detail})` : ""}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * A failure that may pass if the same request is made again later: GitHub's 5xx, its rate
 * limits (429, or a 403 naming the secondary limit), and anything without an HTTP status (a
 * reset connection, a timeout, a store failing over). A 4xx otherwise is GitHub's answer.
 */
export function isTransientGitHubError(error: unknown): boolean {
  if (error === null || typeof error !== "object" || !("status" in error) || typeof error.status !== "number")
    return true;
  const status = error.status;
  if (status >= 500 || status === 429) return true;
  return status === 403 && /secondary rate limit|rate limit exceeded/i.test(describeGitHubError(error));
}
