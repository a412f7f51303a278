import { authorizeRepo } from "./auth.js";
import { listBranches, readCommit, readPath, resolveCommit, type TreeEntry } from "./bare-repo.js";
import { githubError, notFound, paginate, param, route, type ApiContext, type Route } from "./http.js";
import { branchJson, repoJson, userJson } from "./shapes.js";
import { legacyPermission, roleAtLeast, userIdFor, type RepoRecord, type RepoRole } from "./state.js";

/*
 * Repository metadata, the collaborator-permission check the app gates on (as in
 * GitHub's REST documentation), branches, and file contents. Contents come from the bare
 * repository itself, so a file committed by a test (or by `setFile`) is what Harness reads for
 * `.github/harness.yml`; an organisation's defaults live in its `.github` repository, added
 * like any other (`addRepo({ owner: "acme", name: ".github" })`).
 */

function repoFromParams(ctx: ApiContext): RepoRecord | undefined {
  return ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo"));
}

/** A branch, tag or commit, as GitHub resolves `?ref=`; `undefined` when nothing matches. */
export async function resolveRef(repo: RepoRecord, ref: string): Promise<string | undefined> {
  return (
    (await resolveCommit(repo.bareDir, `refs/heads/${ref}`)) ??
    (await resolveCommit(repo.bareDir, `refs/tags/${ref}`)) ??
    (/^[0-9a-f]{4,40}$/i.test(ref) ? await resolveCommit(repo.bareDir, ref) : undefined)
  );
}

// guess: "1 MB" in GitHub's contents documentation is 1,048,576 bytes.
const MAX_INLINE_CONTENT_BYTES = 1024 * 1024;

/** GitHub wraps base64 file content at 60 columns, with a trailing newline. */
function wrappedBase64(content: Buffer): string {
  const encoded = content.toString("base64");
  return encoded.length === 0 ? "" : `${encoded.match(/.{1,60}/g)?.join("\n") ?? ""}\n`;
}

function contentUrls(
  ctx: ApiContext,
  repo: RepoRecord,
  path: string,
  ref: string,
  type: "file" | "dir",
  sha: string,
): Record<string, string> {
  const full = `${repo.owner}/${repo.name}`;
  const self = `${ctx.state.apiUrl}/repos/${full}/contents/${path}?ref=${encodeURIComponent(ref)}`;
  const html = `${ctx.state.baseUrl}/${full}/${type === "dir" ? "tree" : "blob"}/${ref}/${path}`;
  const git = `${ctx.state.apiUrl}/repos/${full}/git/${type === "dir" ? "trees" : "blobs"}/${sha}`;
  return { url: self, html_url: html, git_url: git };
}

/** The entry's URLs again under `_links`, as GitHub repeats them. */
function withLinks(urls: Record<string, string>): Record<string, unknown> {
  return { ...urls, _links: { self: urls["url"], git: urls["git_url"], html: urls["html_url"] } };
}

function entryJson(ctx: ApiContext, repo: RepoRecord, ref: string, entry: TreeEntry): Record<string, unknown> {
  const type = entry.type === "tree" ? "dir" : entry.type === "commit" ? "submodule" : "file";
  return {
    type,
    size: entry.size,
    name: entry.name,
    path: entry.path,
    sha: entry.sha,
    ...withLinks(contentUrls(ctx, repo, entry.path, ref, type === "dir" ? "dir" : "file", entry.sha)),
    download_url: type === "file" ? `${ctx.state.baseUrl}/${repo.owner}/${repo.name}/raw/${ref}/${entry.path}` : null,
  };
}

/** Whether the request asks for `application/vnd.github.raw` (Octokit's `mediaType: { format: "raw" }`). */
function wantsRaw(ctx: ApiContext): boolean {
  return /application\/vnd\.github(\.v3)?\.raw/i.test(ctx.headers.accept ?? "");
}

export function repoRoutes(): Route[] {
  return [
    route("GET", "/repos/{owner}/{repo}", (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [], "read");
      return { status: 200, body: repoJson(ctx.state, repo) };
    }),

    route("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission", (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [], "read");
      const login = param(ctx, "username");
      const user = ctx.state.users.get(login.toLowerCase()) ?? { login, id: userIdFor(login), type: "User" as const };
      // GitHub answers 404 for someone who is not a collaborator (an outside contributor, a
      // stranger, a login that does not exist), whatever the repository's visibility.
      const role: RepoRole | undefined = ctx.state.roleOf(repo, login);
      if (role === undefined) throw notFound();
      const permission = legacyPermission(role);
      return {
        status: 200,
        body: {
          permission,
          role_name: role,
          user: {
            ...userJson(ctx.state, user),
            permissions: {
              admin: roleAtLeast(role, "admin"),
              maintain: roleAtLeast(role, "maintain"),
              push: roleAtLeast(role, "write"),
              triage: roleAtLeast(role, "triage"),
              pull: roleAtLeast(role, "read"),
            },
            role_name: role,
          },
        },
      };
    }),

    route("GET", "/repos/{owner}/{repo}/branches", async (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [], "read");
      const branches = await listBranches(repo.bareDir);
      const { page, headers } = paginate(ctx, branches);
      const base = `${ctx.state.apiUrl}/repos/${repo.owner}/${repo.name}`;
      return {
        status: 200,
        body: page.map((b) => ({
          name: b.name,
          commit: { sha: b.sha, url: `${base}/commits/${b.sha}` },
          protected: repo.protectedBranches.has(b.name),
        })),
        headers,
      };
    }),

    route("GET", "/repos/{owner}/{repo}/branches/{branch*}", async (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [], "read");
      const name = param(ctx, "branch");
      const sha = await resolveCommit(repo.bareDir, `refs/heads/${name}`);
      if (!sha) throw githubError(404, "Branch not found");
      return { status: 200, body: branchJson(ctx.state, repo, name, await readCommit(repo.bareDir, sha)) };
    }),

    route("GET", "/repos/{owner}/{repo}/contents/{path*}", async (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [{ contents: "read" }], "read");
      const path = param(ctx, "path").replace(/^\/+|\/+$/g, "");
      const ref = ctx.query.get("ref") ?? repo.defaultBranch;
      const commit = await resolveRef(repo, ref);
      if (!commit) {
        if ((await listBranches(repo.bareDir)).length === 0) throw githubError(404, "This repository is empty.");
        throw githubError(404, `No commit found for the ref ${ref}`);
      }
      const found = await readPath(repo.bareDir, commit, path);
      if (!found) throw notFound();
      if (found.type === "tree") {
        return { status: 200, body: found.entries.map((entry) => entryJson(ctx, repo, ref, entry)) };
      }
      if (wantsRaw(ctx)) {
        // guess: GitHub labels raw content `application/vnd.github.raw` with a UTF-8 charset;
        // @probot/octokit-plugin-config relies on it not being `application/json; charset=utf-8`,
        // and Octokit decodes it as text because of the charset.
        return { status: 200, raw: { contentType: "application/vnd.github.raw; charset=utf-8", data: found.content } };
      }
      const name = path.split("/").pop() ?? path;
      // GitHub's JSON carries the content of files up to 1 MB; above that it still reports the
      // size but sends `encoding: "none"` and empty content (the raw media type still works).
      const inline = found.content.length <= MAX_INLINE_CONTENT_BYTES;
      return {
        status: 200,
        body: {
          type: "file",
          encoding: inline ? "base64" : "none",
          size: found.content.length,
          name,
          path,
          content: inline ? wrappedBase64(found.content) : "",
          sha: found.sha,
          ...withLinks(contentUrls(ctx, repo, path, ref, "file", found.sha)),
          download_url: `${ctx.state.baseUrl}/${repo.owner}/${repo.name}/raw/${ref}/${path}`,
        },
      };
    }),
  ];
}
