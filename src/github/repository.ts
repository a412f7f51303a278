import type { OctokitLike } from "./octokit-client.js";

/** A repository as the routes below name it. */
export interface RepositoryName {
  owner: string;
  name: string;
}

/**
 * A person's access to a repository as GitHub states it: `permission` (admin, write, read, none)
 * and `roleName`, which also carries maintain and triage. Undefined when GitHub answers 404: the
 * person is no collaborator. Any other failure is thrown, for the caller cannot decide on it.
 */
export async function collaboratorPermission(
  octokit: OctokitLike,
  repo: RepositoryName,
  username: string,
): Promise<{ permission?: string; roleName?: string } | undefined> {
  try {
    const response = await octokit.request("GET /repos/{owner}/{repo}/collaborators/{username}/permission", {
      owner: repo.owner,
      repo: repo.name,
      username,
    });
    const data = response.data as { permission?: string; role_name?: string };
    return {
      ...(data.permission ? { permission: data.permission } : {}),
      ...(data.role_name ? { roleName: data.role_name } : {}),
    };
  } catch (error) {
    if (typeof error === "object" && error !== null && "status" in error && error.status === 404) return undefined;
    throw error;
  }
}

/** A pull request's head: its branch, and the repository it lives in (null when that was deleted). */
export async function pullRequestHead(
  octokit: OctokitLike,
  repo: RepositoryName,
  pullNumber: number,
): Promise<{ ref: string; repoFullName: string | null }> {
  const response = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}", {
    owner: repo.owner,
    repo: repo.name,
    pull_number: pullNumber,
  });
  const data = response.data as { head: { ref: string; repo: { full_name: string } | null } };
  return { ref: data.head.ref, repoFullName: data.head.repo?.full_name ?? null };
}

/** A branch's head commit: its sha and message. A failed lookup (404 included) is thrown. */
export async function branchHead(
  octokit: OctokitLike,
  repo: RepositoryName,
  branch: string,
): Promise<{ sha: string; message: string }> {
  const response = await octokit.request("GET /repos/{owner}/{repo}/branches/{branch}", {
    owner: repo.owner,
    repo: repo.name,
    branch,
  });
  const data = response.data as { commit: { sha: string; commit: { message: string } } };
  return { sha: data.commit.sha, message: data.commit.commit.message };
}

/** True when GitHub reports the branch protected; a missing branch is not. Other failures are thrown. */
export async function isProtectedBranch(octokit: OctokitLike, repo: RepositoryName, branch: string): Promise<boolean> {
  try {
    const response = await octokit.request("GET /repos/{owner}/{repo}/branches/{branch}", {
      owner: repo.owner,
      repo: repo.name,
      branch,
    });
    return (response.data as { protected?: boolean }).protected === true;
  } catch (error) {
    if (typeof error === "object" && error !== null && "status" in error && error.status === 404) return false;
    throw error;
  }
}

/** True when the branch exists on GitHub; a failed lookup is thrown. */
export async function branchExists(octokit: OctokitLike, repo: RepositoryName, branch: string): Promise<boolean> {
  try {
    await octokit.request("GET /repos/{owner}/{repo}/branches/{branch}", {
      owner: repo.owner,
      repo: repo.name,
      branch,
    });
    return true;
  } catch (error) {
    if (typeof error === "object" && error !== null && "status" in error && error.status === 404) return false;
    throw error;
  }
}
