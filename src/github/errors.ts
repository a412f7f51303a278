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
