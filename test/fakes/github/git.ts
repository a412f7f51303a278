import { spawn } from "node:child_process";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { writeCgiResponse } from "../git-http-server.js";
import { refusals, type HttpRefusal } from "../github-git-rejections.js";
import { credentialFromHeader, liveToken } from "./auth.js";
import { isolatedGitEnv } from "./bare-repo.js";
import { levelCovers, type FakeGitHubState, type RepoRecord, type TokenRecord } from "./state.js";

/*
 * Git smart HTTP at `/{owner}/{repo}.git/…`, served by the real `git http-backend` (CGI) as in
 * test/fakes/git-http-server.ts, behind GitHub's access rules for installation tokens
 * (HTTP Basic, password = token):
 *
 * - fetch needs a live token reaching the repository with contents:read (public: anyone);
 * - push needs contents:write, else 403 `Permission to o/r.git denied to <slug>[bot].`;
 * - a push that creates or changes `.github/workflows/**` also needs workflows:write, else the
 *   ref is refused by the proc-receive hook from test/fakes/github-git-rejections.ts with
 *   GitHub's `refusing to allow a GitHub App to create or update workflow …` reason;
 * - unknown, revoked or expired tokens get 401 with GitHub's "Invalid username or token" text.
 *
 * The workflow hook is installed in every repository but only switched on (through
 * `receive.procReceiveRefs`, passed as per-process config) for tokens lacking the permission,
 * so the decision stays with the token rather than the repository.
 */

const GIT_PATH = /^\/([^/]+)\/([^/]+?)(?:\.git)?(\/(?:info\/refs|git-upload-pack|git-receive-pack|HEAD|objects\/.+))$/;

export function matchGitPath(pathname: string): { owner: string; name: string; rest: string } | undefined {
  const match = GIT_PATH.exec(pathname);
  if (!match?.[1] || !match[2] || !match[3]) return undefined;
  return { owner: decodeURIComponent(match[1]), name: decodeURIComponent(match[2]), rest: match[3] };
}

export interface GitRequest {
  method: string;
  pathname: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type GitAuth = { kind: "token"; installationId: number } | { kind: "none" };

const INVALID_TOKEN: HttpRefusal = {
  status: 401,
  body: "Invalid username or token. Password authentication is not supported for Git operations.",
};

function refuse(res: ServerResponse, refusal: HttpRefusal, challenge = false): void {
  res.writeHead(refusal.status, {
    "Content-Type": refusal.contentType ?? "text/plain; charset=utf-8",
    ...(challenge ? { "WWW-Authenticate": 'Basic realm="GitHub"' } : {}),
  });
  res.end(`${refusal.body}\n`);
}

/** Answers one smart-HTTP request; returns who it was authenticated as, for the request log. */
export async function handleGit(
  state: FakeGitHubState,
  projectRoot: string,
  request: GitRequest,
  res: ServerResponse,
): Promise<GitAuth> {
  const target = matchGitPath(request.pathname);
  if (!target) throw new Error(`not a git path: ${request.pathname}`);
  const pushing = request.query.get("service") === "git-receive-pack" || target.rest === "/git-receive-pack";
  const repo = state.findRepo(target.owner, target.name);
  // guess: GitHub takes the password as the token whatever the user name; the docs use `x-access-token`.
  const secret = credentialFromHeader(request.headers.authorization);

  if (secret === undefined) {
    // Anonymous: only public repositories can be fetched; everything else asks for credentials,
    // without saying whether the repository exists.
    if (repo && !repo.private && !pushing) {
      await runBackend(projectRoot, repo, request, res, { user: "anonymous", workflows: true });
      return { kind: "none" };
    }
    refuse(res, { status: 401, body: "" }, true);
    return { kind: "none" };
  }

  const live = liveToken(state, secret);
  if (!live) {
    refuse(res, INVALID_TOKEN, true);
    return { kind: "none" };
  }
  const auth: GitAuth = { kind: "token", installationId: live.installation.id };
  const login = `${live.app.slug}[bot]`;
  if (!repo) {
    refuse(res, refusals.notFound());
    return auth;
  }
  const fullName = `${repo.owner}/${repo.name}`;
  const covered = state.tokenCovers(live.token, repo);
  if (!covered && repo.private) {
    refuse(res, refusals.notFound());
    return auth;
  }

  if (!pushing) {
    // guess: a token that reaches a private repository without contents:read is refused like a push.
    if (!repo.private || levelCovers(live.token.permissions["contents"], "read")) {
      await runBackend(projectRoot, repo, request, res, { user: "x-access-token", workflows: true });
    } else {
      refuse(res, refusals.permission(fullName, login));
    }
    return auth;
  }

  if (!covered || !levelCovers(live.token.permissions["contents"], "write")) {
    refuse(res, refusals.permission(fullName, login));
    return auth;
  }
  if (repo.archived) {
    refuse(res, refusals.archived());
    return auth;
  }
  await runBackend(projectRoot, repo, request, res, {
    user: "x-access-token",
    workflows: canWriteWorkflows(live.token),
  });
  return auth;
}

function canWriteWorkflows(token: TokenRecord): boolean {
  return levelCovers(token.permissions["workflows"], "write");
}

/**
 * Runs `git http-backend` for one request and relays its CGI answer. The request body was
 * already read (the fake records it), so it is written to the backend's stdin in one go.
 */
async function runBackend(
  projectRoot: string,
  repo: RepoRecord,
  request: GitRequest,
  res: ServerResponse,
  options: { user: string; workflows: boolean },
): Promise<void> {
  const target = matchGitPath(request.pathname);
  const rest = target?.rest ?? "/";
  // Without the workflows permission, receive-pack hands branch updates to the proc-receive
  // hook that refuses workflow changes (installed by addRepo, inactive unless configured).
  const workflowGate: Record<string, string> = options.workflows
    ? {}
    : { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "receive.procReceiveRefs", GIT_CONFIG_VALUE_0: "refs/heads/" };
  const child = spawn("git", ["http-backend"], {
    env: isolatedGitEnv({
      ...workflowGate,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: "1",
      REQUEST_METHOD: request.method,
      PATH_INFO: `/${repo.owner}/${repo.name}.git${rest}`,
      QUERY_STRING: request.query.toString(),
      CONTENT_TYPE: request.headers["content-type"] ?? "",
      CONTENT_LENGTH: String(request.body.length),
      HTTP_CONTENT_ENCODING: request.headers["content-encoding"] ?? "",
      GIT_PROTOCOL: String(request.headers["git-protocol"] ?? ""),
      // receive-pack over HTTP is only enabled for an authenticated REMOTE_USER.
      REMOTE_USER: options.user,
      REMOTE_ADDR: "127.0.0.1",
    }),
    stdio: ["pipe", "pipe", "pipe"],
  });
  const chunks: Buffer[] = [];
  child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
  child.stderr.resume();
  const closed = new Promise<void>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", () => {
      resolve();
    });
  });
  child.stdin.on("error", () => {
    // The backend may exit before reading everything (e.g. a refused request); its answer still counts.
  });
  child.stdin.end(request.body);
  await closed;

  writeCgiResponse(res, Buffer.concat(chunks));
}
