import { spawn } from "node:child_process";
import type { ToolboxContext } from "./context.js";
import {
  bool,
  daemonError,
  HttpError,
  num,
  resolveSandboxPath,
  sendEmpty,
  sendJson,
  str,
  stringArray,
} from "./http-util.js";
import type { FakeSandbox } from "./state.js";

interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

interface Credentials {
  username?: string | undefined;
  password?: string | undefined;
}

/**
 * Environment for the fake daemon's own git runs: no user/system config, never a prompt (a prompt would hang the
 * request), `HOME` inside the sandbox.
 */
function gitEnv(
  ctx: ToolboxContext,
  config: [string, string][],
  extra: Record<string, string> = {},
): Record<string, string> {
  const env: Record<string, string> = {
    PATH: ctx.world.config.baseEnv["PATH"] ?? process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: ctx.sandbox.homeDir,
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_NOSYSTEM: "1",
    LC_ALL: "C",
    ...extra,
  };
  // Per-invocation config through the environment: it lives only in this child's env, never in .git/config (as
  // `git clone -c` would write it) and never in the URL.
  if (config.length > 0) {
    env["GIT_CONFIG_COUNT"] = String(config.length);
    config.forEach(([key, value], index) => {
      env[`GIT_CONFIG_KEY_${String(index)}`] = key;
      env[`GIT_CONFIG_VALUE_${String(index)}`] = value;
    });
  }
  return env;
}

/**
 * The real daemon authenticates each clone/push/pull with go-git `BasicAuth{username, password}` from the request
 * body, per request. The fake does the same with an env-scoped `http.extraHeader` for that one git child.
 */
function authConfig(credentials: Credentials): [string, string][] {
  if (credentials.username === undefined && credentials.password === undefined) return [];
  const basic = Buffer.from(`${credentials.username ?? ""}:${credentials.password ?? ""}`).toString("base64");
  return [["http.extraHeader", `Authorization: Basic ${basic}`]];
}

function runGit(
  ctx: ToolboxContext,
  args: string[],
  options: { config?: [string, string][]; env?: Record<string, string> } = {},
): Promise<GitResult> {
  const sandbox: FakeSandbox = ctx.sandbox;
  return new Promise((resolve) => {
    // Detached, like commands, so delete/close can kill a hung git (e.g. a remote that never answers) by group.
    const child = spawn("git", args, {
      cwd: sandbox.dir,
      env: gitEnv(ctx, options.config ?? [], options.env),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    if (child.pid !== undefined) sandbox.processes.set(child.pid, child);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", (error) => {
      resolve({ code: -1, stdout: "", stderr: error.message });
    });
    child.on("close", (code, signal) => {
      if (child.pid !== undefined) sandbox.processes.delete(child.pid);
      resolve({
        code: code ?? (signal ? 128 : -1),
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
      });
    });
  });
}

type GitOp =
  | "clone"
  | "push"
  | "pull"
  | "checkout"
  | "branch-create"
  | "branch-delete"
  | "add"
  | "commit"
  | "status"
  | "branches"
  | "init";

/**
 * Maps a failed git run to the daemon's HTTP status and code (daemon v0.190 mapping: auth → 401, authorization →
 * 403, not found → 404, non-fast-forward / dirty worktree / branch exists → 409, else 500). The `code` values are the
 * ones the SDK 0.218 knows (errors/DaytonaError.js CODE_TO_ERROR_CLASS); that the current daemon sends exactly these
 * for these situations is a guess. Refinements beyond the v0.190 table (guesses, taken from the SDK's class parents):
 * hook/protection rejections → 422 GIT_REMOTE_REJECTED, unreachable remote → 502 GIT_TRANSPORT_FAILED.
 * `message` carries git's stderr (with any password redacted).
 */
function gitFailure(ctx: ToolboxContext, op: GitOp, result: GitResult, credentials: Credentials = {}): HttpError {
  let text = `${result.stderr}\n${result.stdout}`.trim();
  if (credentials.password) text = text.split(credentials.password).join("***");
  const message = `git ${op} failed: ${text}`;
  const fail = (status: number, code?: string): HttpError => daemonError(status, message, code, ctx);
  if (
    new RegExp(
      "Authentication failed|could not read (Username|Password)|terminal prompts disabled|" +
        "HTTP Basic: Access denied|returned error: 401|Invalid username or (password|token)",
      "i",
    ).test(text)
  ) {
    return fail(401, "GIT_AUTH_FAILED");
  }
  if (/returned error: 403|Permission to .* denied/i.test(text)) return fail(403);
  if (/\[remote rejected\]|pre-receive hook declined|protected branch|GH006|GH013/i.test(text))
    return fail(422, "GIT_REMOTE_REJECTED");
  if (/non-fast-forward|\[rejected\]|fetch first|Updates were rejected/i.test(text))
    return fail(409, "GIT_PUSH_REJECTED");
  if (
    new RegExp(
      "Remote branch .* not found|did not match any file\\(s\\) known to git|invalid reference|" +
        "src refspec .* does not match any|branch '.*' not found|not a valid branch name",
      "i",
    ).test(text)
  ) {
    return op === "add" ? fail(404) : fail(404, "GIT_BRANCH_NOT_FOUND");
  }
  if (
    new RegExp(
      "repository '.*' not found|Repository not found|does not appear to be a git repository|" +
        "repository '.*' does not exist|returned error: 404",
      "i",
    ).test(text)
  ) {
    return fail(404, "GIT_REPO_NOT_FOUND");
  }
  if (/not a git repository|cannot change to|pathspec .* did not match/i.test(text)) return fail(404);
  if (/would be overwritten by checkout|Please commit your changes or stash them/i.test(text))
    return fail(409, "GIT_DIRTY_WORKTREE");
  if (/CONFLICT|Automatic merge failed/.test(text)) return fail(409, "GIT_MERGE_CONFLICT");
  if (op === "branch-create" && /already exists/i.test(text)) return fail(409, "GIT_BRANCH_EXISTS");
  if (/already exists|checked out at/i.test(text)) return fail(409);
  if (
    new RegExp(
      "Could not resolve host|Failed to connect|Connection refused|Connection timed out|" +
        "SSL certificate problem|unable to access",
      "i",
    ).test(text)
  ) {
    return fail(502, "GIT_TRANSPORT_FAILED");
  }
  return fail(500);
}

function repoPath(ctx: ToolboxContext, value: string | undefined): string {
  if (value === undefined || value === "") throw daemonError(400, "path is required", undefined, ctx);
  return resolveSandboxPath(ctx.sandbox.dir, ctx.sandbox.workDir, value, ctx);
}

function isLocalUrl(url: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && !/^[^/]+@[^/]+:/.test(url);
}

const STATUS_NAMES: Record<string, string> = {
  ".": "Unmodified",
  " ": "Unmodified",
  "?": "Untracked",
  M: "Modified",
  T: "Modified",
  A: "Added",
  D: "Deleted",
  R: "Renamed",
  C: "Copied",
  U: "Updated but unmerged",
};

/** Parses `git status --porcelain=v2 --branch -z` into the toolbox `GitStatus` shape. */
function parseStatus(raw: string): unknown {
  const tokens = raw.split("\0");
  let currentBranch = "";
  let detached = false;
  let upstream: string | undefined;
  let ahead = 0;
  let behind = 0;
  const fileStatus: { name: string; staging: string; worktree: string; extra: string }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? "";
    if (token.startsWith("# branch.head ")) {
      const head = token.slice("# branch.head ".length);
      detached = head === "(detached)";
      currentBranch = detached ? "HEAD" : head;
    } else if (token.startsWith("# branch.upstream ")) {
      upstream = token.slice("# branch.upstream ".length);
    } else if (token.startsWith("# branch.ab ")) {
      const match = /\+(\d+) -(\d+)/.exec(token);
      ahead = Number(match?.[1] ?? 0);
      behind = Number(match?.[2] ?? 0);
    } else if (token.startsWith("? ")) {
      fileStatus.push({ name: token.slice(2), staging: "Untracked", worktree: "Untracked", extra: "" });
    } else if (/^[12u] /.test(token)) {
      const parts = token.split(" ");
      const xy = parts[1] ?? "..";
      const skip = token.startsWith("1 ") ? 8 : token.startsWith("2 ") ? 9 : 10;
      const name = parts.slice(skip).join(" ");
      let extra = "";
      if (token.startsWith("2 ")) {
        extra = tokens[i + 1] ?? "";
        i += 1;
      }
      fileStatus.push({
        name,
        staging: STATUS_NAMES[xy[0] ?? "."] ?? "Unmodified",
        worktree: STATUS_NAMES[xy[1] ?? "."] ?? "Unmodified",
        extra,
      });
    }
  }
  return {
    currentBranch,
    fileStatus,
    ahead,
    behind,
    branchPublished: upstream !== undefined,
    detached,
    ...(upstream === undefined ? {} : { upstream }),
  };
}

async function currentBranch(ctx: ToolboxContext, dir: string): Promise<string | undefined> {
  const result = await runGit(ctx, ["-C", dir, "symbolic-ref", "--short", "-q", "HEAD"]);
  const name = result.stdout.trim();
  return result.code === 0 && name !== "" ? name : undefined;
}

/** `/git/...` routes. Returns false when the route is not a git route. */
export async function handleGit(ctx: ToolboxContext): Promise<boolean> {
  const { segments: seg, method, body, query } = ctx;
  if (seg[0] !== "git" || seg.length !== 2) return false;
  const route = `${method} ${seg[1] ?? ""}`;

  switch (route) {
    case "POST clone": {
      const url = str(body, "url");
      if (!url) throw daemonError(400, "url is required", undefined, ctx);
      const dest = repoPath(ctx, str(body, "path"));
      const credentials: Credentials = { username: str(body, "username"), password: str(body, "password") };
      const branch = str(body, "branch");
      const depth = num(body, "depth");
      const commitId = str(body, "commit_id");
      const config = authConfig(credentials);
      if (bool(body, "insecure_skip_tls") === true) config.push(["http.sslVerify", "false"]);
      const args = ["clone", "--quiet"];
      if (depth !== undefined && depth > 0) {
        args.push("--depth", String(depth));
        // A plain local path ignores --depth; --no-local makes git use the real transport so depth is honoured.
        if (isLocalUrl(url)) args.push("--no-local");
      }
      if (branch) args.push("--branch", branch);
      args.push("--", url, dest);
      const result = await runGit(ctx, args, { config });
      if (result.code !== 0) throw gitFailure(ctx, "clone", result, credentials);
      if (commitId) {
        const checkout = await runGit(ctx, ["-C", dest, "checkout", "--quiet", "--detach", commitId]);
        if (checkout.code !== 0) throw gitFailure(ctx, "checkout", checkout);
      }
      sendEmpty(ctx.res, 200);
      return true;
    }
    case "POST branches": {
      // The daemon does go-git Checkout{Create:true}: the new branch is created AND checked out.
      const dir = repoPath(ctx, str(body, "path"));
      const name = str(body, "name");
      if (!name) throw daemonError(400, "name is required", undefined, ctx);
      const result = await runGit(ctx, ["-C", dir, "checkout", "--quiet", "-b", name]);
      if (result.code !== 0) throw gitFailure(ctx, "branch-create", result);
      sendEmpty(ctx.res, 201);
      return true;
    }
    case "GET branches": {
      const dir = repoPath(ctx, query.get("path") ?? undefined);
      const result = await runGit(ctx, ["-C", dir, "for-each-ref", "--format=%(refname:short)", "refs/heads/"]);
      if (result.code !== 0) throw gitFailure(ctx, "branches", result);
      const current = await currentBranch(ctx, dir);
      sendJson(ctx.res, 200, {
        branches: result.stdout.split("\n").filter((line) => line !== ""),
        ...(current ? { current } : {}),
      });
      return true;
    }
    case "DELETE branches": {
      const dir = repoPath(ctx, str(body, "path"));
      const name = str(body, "name");
      if (!name) throw daemonError(400, "name is required", undefined, ctx);
      const result = await runGit(ctx, ["-C", dir, "branch", "-D", name]);
      if (result.code !== 0) throw gitFailure(ctx, "branch-delete", result);
      sendEmpty(ctx.res, 204);
      return true;
    }
    case "POST checkout": {
      const dir = repoPath(ctx, str(body, "path"));
      const branch = str(body, "branch");
      if (!branch) throw daemonError(400, "branch is required", undefined, ctx);
      const result = await runGit(ctx, ["-C", dir, "checkout", "--quiet", branch]);
      if (result.code !== 0) throw gitFailure(ctx, "checkout", result);
      sendEmpty(ctx.res, 200);
      return true;
    }
    case "POST add": {
      const dir = repoPath(ctx, str(body, "path"));
      const files = stringArray(body, "files") ?? [];
      if (files.length === 0) throw daemonError(400, "files is required", undefined, ctx);
      const result = await runGit(ctx, ["-C", dir, "add", "--", ...files]);
      if (result.code !== 0) throw gitFailure(ctx, "add", result);
      sendEmpty(ctx.res, 200);
      return true;
    }
    case "POST commit": {
      const dir = repoPath(ctx, str(body, "path"));
      const message = str(body, "message") ?? "";
      const author = str(body, "author") ?? "";
      const email = str(body, "email") ?? "";
      const allowEmpty = bool(body, "allow_empty") === true;
      // go-git signs both author and committer with the request's author/email.
      const identity = {
        GIT_AUTHOR_NAME: author,
        GIT_AUTHOR_EMAIL: email,
        GIT_COMMITTER_NAME: author,
        GIT_COMMITTER_EMAIL: email,
      };
      const args = ["-C", dir, "commit", "--quiet", "--no-verify", "-m", message];
      if (allowEmpty) args.push("--allow-empty");
      const result = await runGit(ctx, args, { env: identity });
      if (result.code !== 0) {
        if (
          /nothing to commit|nothing added to commit|no changes added to commit/i.test(
            `${result.stdout}${result.stderr}`,
          )
        ) {
          // Daemon v0.190: go-git ErrEmptyCommit → HTTP 500 with go-git's text (code: none, guess).
          throw daemonError(500, "cannot create empty commit: clean working tree", undefined, ctx);
        }
        throw gitFailure(ctx, "commit", result);
      }
      const head = await runGit(ctx, ["-C", dir, "rev-parse", "HEAD"]);
      sendJson(ctx.res, 200, { hash: head.stdout.trim() });
      return true;
    }
    case "POST push":
    case "POST pull": {
      const op = route === "POST push" ? "push" : "pull";
      const dir = repoPath(ctx, str(body, "path"));
      const credentials: Credentials = { username: str(body, "username"), password: str(body, "password") };
      const remote = str(body, "remote") ?? "origin";
      const branch = str(body, "branch") ?? (await currentBranch(ctx, dir));
      // guess
      if (!branch) throw daemonError(400, `cannot ${op}: HEAD is detached and no branch was given`, undefined, ctx);
      // guess: `branch` names the local branch, pushed to the same name on `remote` (the v0.190 daemon pushed
      // refs/heads/<current>:refs/heads/<current> to origin; `branch`/`remote`/`set_upstream` are newer).
      const args =
        op === "push"
          ? [
              "-C",
              dir,
              "push",
              ...(bool(body, "set_upstream") === true ? ["--set-upstream"] : []),
              remote,
              `refs/heads/${branch}:refs/heads/${branch}`,
            ]
          : ["-C", dir, "pull", "--no-rebase", "--no-edit", remote, branch];
      const result = await runGit(ctx, args, { config: authConfig(credentials) });
      if (result.code !== 0) throw gitFailure(ctx, op, result, credentials);
      sendEmpty(ctx.res, 200);
      return true;
    }
    case "GET status": {
      const dir = repoPath(ctx, query.get("path") ?? undefined);
      const result = await runGit(ctx, ["-C", dir, "status", "--porcelain=v2", "--branch", "-z"]);
      if (result.code !== 0) throw gitFailure(ctx, "status", result);
      sendJson(ctx.res, 200, parseStatus(result.stdout));
      return true;
    }
    case "POST init": {
      const dir = repoPath(ctx, str(body, "path"));
      const initialBranch = str(body, "initial_branch");
      const args = [
        "init",
        "--quiet",
        ...(bool(body, "bare") === true ? ["--bare"] : []),
        ...(initialBranch ? [`--initial-branch=${initialBranch}`] : []),
        dir,
      ];
      const result = await runGit(ctx, args);
      if (result.code !== 0) throw gitFailure(ctx, "init", result);
      sendEmpty(ctx.res, 200);
      return true;
    }
    default:
      return false;
  }
}
