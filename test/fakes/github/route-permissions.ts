import type { PermissionNeed } from "./auth.js";

/*
 * What an installation token needs for each route the fake serves, after GitHub's "Permissions
 * required for GitHub Apps" reference: any one entry of a list suffices, an empty list means any
 * token of the installation will do (metadata is implied), and `jwt` marks the app's own routes.
 * `authorizeRepo` enforces this table for every repository route; a route's handler may check
 * more finely (an issue needs `issues`, a pull request either permission), never less.
 */

const read = (...names: string[]): PermissionNeed[] => names.map((name) => ({ [name]: "read" }));
const write = (...names: string[]): PermissionNeed[] => names.map((name) => ({ [name]: "write" }));

export const ROUTE_PERMISSIONS: Readonly<Record<string, readonly PermissionNeed[] | "jwt">> = {
  "GET /app": "jwt",
  "GET /apps/{app_slug}": [],
  "GET /app/installations": "jwt",
  "GET /app/hook/deliveries": "jwt",
  "GET /app/installations/{installation_id}": "jwt",
  "POST /app/installations/{installation_id}/access_tokens": "jwt",
  "GET /repos/{owner}/{repo}/installation": "jwt",
  "GET /installation/repositories": [],
  "DELETE /installation/token": [],
  "GET /users/{username}": [],
  "GET /rate_limit": [],
  "GET /repos/{owner}/{repo}": read("metadata"),
  "GET /repos/{owner}/{repo}/collaborators/{username}/permission": read("metadata"),
  // Branches are repository contents: metadata alone does not list them.
  "GET /repos/{owner}/{repo}/branches": read("contents"),
  "GET /repos/{owner}/{repo}/branches/{branch*}": read("contents"),
  "GET /repos/{owner}/{repo}/contents/{path*}": read("contents"),
  "GET /repos/{owner}/{repo}/issues/{issue_number}": read("issues", "pull_requests"),
  "GET /repos/{owner}/{repo}/issues/{issue_number}/comments": read("issues", "pull_requests"),
  "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": write("issues", "pull_requests"),
  "GET /repos/{owner}/{repo}/issues/comments/{comment_id}": read("issues", "pull_requests"),
  "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": write("issues", "pull_requests"),
  "DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}": write("issues", "pull_requests"),
  "GET /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions": read("issues", "pull_requests"),
  // Reacting to a comment is an Issues write, whatever the comment's thread.
  "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions": write("issues"),
  "POST /repos/{owner}/{repo}/issues/{issue_number}/reactions": write("issues", "pull_requests"),
  "POST /repos/{owner}/{repo}/issues/{issue_number}/labels": write("issues", "pull_requests"),
  "GET /repos/{owner}/{repo}/pulls": read("pull_requests"),
  "POST /repos/{owner}/{repo}/pulls": write("pull_requests"),
  "GET /repos/{owner}/{repo}/pulls/{pull_number}": read("pull_requests"),
  "PATCH /repos/{owner}/{repo}/pulls/{pull_number}": write("pull_requests"),
  "POST /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers": write("pull_requests"),
  "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews": read("pull_requests"),
  "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}": read("pull_requests"),
  "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments": read("pull_requests"),
  "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments": read("pull_requests"),
  "GET /repos/{owner}/{repo}/pulls/comments/{comment_id}": read("pull_requests"),
  "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies": write("pull_requests"),
  "GET /repos/{owner}/{repo}/commits/{ref}/check-suites": read("checks"),
  "GET /repos/{owner}/{repo}/commits/{ref}/check-runs": read("checks"),
  "GET /repos/{owner}/{repo}/check-runs/{check_run_id}": read("checks"),
  "POST /repos/{owner}/{repo}/check-suites/{check_suite_id}/rerequest": write("checks"),
  "POST /repos/{owner}/{repo}/check-runs/{check_run_id}/rerequest": write("checks"),
  "GET /repos/{owner}/{repo}/commits/{ref}/status": read("statuses"),
  "GET /repos/{owner}/{repo}/commits/{ref}/statuses": read("statuses"),
  "GET /repos/{owner}/{repo}/actions/runs": read("actions"),
  "GET /repos/{owner}/{repo}/actions/runs/{run_id}": read("actions"),
  "GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs": read("actions"),
  "GET /repos/{owner}/{repo}/actions/jobs/{job_id}": read("actions"),
  "GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs": read("actions"),
  "POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs": write("actions"),
  "POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun": write("actions"),
};
