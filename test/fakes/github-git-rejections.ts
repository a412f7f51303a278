import { chmod, writeFile } from "node:fs/promises";
import { createServer as createHttpServer, request } from "node:http";
import { createServer, type AddressInfo, type Server } from "node:net";
import { basename, dirname, join } from "node:path";
import { shellQuote } from "../../src/util/shell.js";
import { git } from "../helpers/git.js";
import { startGitHttpServer, type GitHttpServer, type RecordedGitRequest } from "./git-http-server.js";

/*
 * Makes real git reproduce GitHub's push rejections byte for byte where it matters, so the
 * push-error classifier is tested against what git actually prints rather than against what we
 * believe it prints. Two mechanisms, as on GitHub itself:
 *
 * - Auth-stage refusals (401/403/404) are HTTP answers to `GET info/refs`, whose text/plain body
 *   git shows as `remote:` lines: a small proxy in front of `startGitHttpServer` answers them.
 * - Policy refusals happen in receive-pack, so they are server-side hooks in the bare repository:
 *   `pre-receive` when GitHub's stock reason (`pre-receive hook declined`) is what GitHub shows,
 *   and `proc-receive` (git >= 2.29) when GitHub shows its own reason, such as
 *   `protected branch hook declined`, which no pre-receive or update hook can produce.
 *
 * Hooks print GitHub's messages to stderr without git's trailing padding: the client adds it.
 */

/** An HTTP answer that replaces git's own for a repository's push endpoints. */
export interface HttpRefusal {
  status: number;
  /** GitHub's message; git prints each line as `remote: <line>`, but only for text/plain. */
  body: string;
  contentType?: string;
}

/** GitHub's answers to a push it refuses before looking at any ref (bodies as GitHub words them). */
export const refusals = {
  permission: (repo: string, login: string): HttpRefusal => ({
    status: 403,
    body: `Permission to ${repo}.git denied to ${login}.`,
  }),
  writeAccessNotGranted: (): HttpRefusal => ({ status: 403, body: "Write access to repository not granted." }),
  notFound: (): HttpRefusal => ({ status: 404, body: "Repository not found." }),
  archived: (): HttpRefusal => ({ status: 403, body: "This repository was archived so it is read-only." }),
};

export interface GitHubLikeServer {
  /** Base URL; repositories are at `<url>/<owner>/<name>.git`. */
  url: string;
  repoUrl(repo: string): string;
  /** Requests that reached `git http-backend` (refused ones never do). */
  requests: RecordedGitRequest[];
  /**
   * Answer pushes to `owner/name` with `refusal` (or stop, with `undefined`). Only the
   * receive-pack endpoints are refused, so a test can still clone or fetch the repository, as
   * one can from an archived repository or one the token may only read.
   */
  refusePush(repo: string, refusal: HttpRefusal | undefined): void;
  close(): Promise<void>;
}

/**
 * `startGitHttpServer` (which already answers a wrong token with GitHub's 401) behind a proxy
 * that can refuse pushes per repository. A proxy rather than a hook inside that server keeps the
 * shared fake unchanged for its other users.
 */
export async function startGitHubLikeServer(options: {
  projectRoot: string;
  token?: string;
}): Promise<GitHubLikeServer> {
  const inner: GitHttpServer = await startGitHttpServer(options);
  const upstream = new URL(inner.url);
  const refused = new Map<string, HttpRefusal>();

  const proxy = createHttpServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const repo = /^\/([^/]+\/[^/]+?)(?:\.git)?\//.exec(url.pathname)?.[1];
    const pushing =
      url.searchParams.get("service") === "git-receive-pack" || url.pathname.endsWith("/git-receive-pack");
    const refusal = repo !== undefined && pushing ? refused.get(repo) : undefined;
    if (refusal) {
      req.resume();
      res.writeHead(refusal.status, { "Content-Type": refusal.contentType ?? "text/plain; charset=utf-8" });
      res.end(`${refusal.body}\n`);
      return;
    }
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent: false,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on("error", (error) => {
      res.writeHead(502, { "Content-Type": "text/plain" });
      res.end(String(error));
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const { port } = proxy.address() as AddressInfo;
  const url = `http://127.0.0.1:${String(port)}`;

  return {
    url,
    repoUrl: (repo) => `${url}/${repo}.git`,
    requests: inner.requests,
    refusePush: (repo, refusal) => {
      if (refusal) refused.set(repo, refusal);
      else refused.delete(repo);
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        proxy.close(() => {
          resolve();
        });
      });
      await inner.close();
    },
  };
}

/**
 * A `http://127.0.0.1:<port>` URL nobody listens on, for "could not connect". The port was
 * just free (we listened on it and closed), so the push fails fast with a refused connection
 * instead of waiting for a timeout, and nothing leaves the machine.
 */
export async function closedPortUrl(): Promise<string> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) =>
    server.close((error) => {
      if (error) reject(error);
      else resolve();
    }),
  );
  return `http://127.0.0.1:${String(port)}`;
}

/**
 * Adds a commit to `branch` directly in the bare repository, as another pusher would, so the
 * client's next push of that branch is not a fast-forward (`fetch first`: the client has never
 * seen the new tip).
 */
export function moveBranch(bare: string, branch: string): string {
  const tip = git(bare, "rev-parse", `refs/heads/${branch}`);
  const commit = git(bare, "commit-tree", `${tip}^{tree}`, "-p", tip, "-m", "Someone else's change");
  git(bare, "update-ref", `refs/heads/${branch}`, commit, tip);
  return commit;
}

/** GitHub's limit for one file; tests pass a smaller one so that they need not write 100 MB. */
export const GITHUB_FILE_SIZE_LIMIT = 100 * 1024 * 1024;

/**
 * GH001: a `pre-receive` hook that refuses any pushed blob larger than `limitBytes`, naming the
 * file and its size in MB as GitHub does. GitHub's reason is git's stock one, so a pre-receive
 * hook reproduces it exactly.
 */
export async function limitFileSize(bare: string, limitBytes: number = GITHUB_FILE_SIZE_LIMIT): Promise<void> {
  await writeHook(
    bare,
    "pre-receive",
    `#!/bin/sh
# GH001: refuse pushed blobs over the limit. Objects the repository already had are not checked.
limit=${String(limitBytes)}
found=$(while read -r old new ref; do
  case $new in *[!0]*) git rev-list --objects "$new" --not --all ;; esac
done | git cat-file --batch-check='%(objecttype) %(objectsize) %(rest)' |
  awk -v limit="$limit" '$1 == "blob" && $2 > limit {
    path = $0; sub(/^[^ ]+ [^ ]+ /, "", path)
    printf "error: File %s is %.2f MB; this exceeds GitHub\\047s file size limit of %.2f MB\\n", ` +
      `path, $2 / 1048576, limit / 1048576
  }')
[ -z "$found" ] && exit 0
{
  echo "error: Trace: 654c8d72f32f9965c4734092a2fb75d32fe2a39f6d10881c1465db48addc3ea4"
  echo "error: See https://gh.io/lfs for more information."
  printf '%s\\n' "$found"
  echo "error: GH001: Large files detected. You may want to try Git Large File Storage - https://git-lfs.github.com/."
} >&2
exit 1
`,
  );
}

export interface ProtectBranchOptions {
  branch: string;
  /** The rules GitHub lists; by default the commonest one. */
  rules?: readonly string[];
  /** GitHub's current output (`- rule` bullets after a blank line) or the pre-2024 one (`error: rule`). */
  format?: "bullets" | "legacy";
}

/** GH006: every update of `branch` is refused with `protected branch hook declined`. */
export async function protectBranch(bare: string, options: ProtectBranchOptions): Promise<void> {
  const ref = `refs/heads/${options.branch}`;
  const rules = options.rules ?? ["Changes must be made through a pull request."];
  const lines =
    options.format === "legacy" ? rules.map((rule) => `error: ${rule}`) : ["", ...rules.map((rule) => `- ${rule}`)];
  await installProcReceive(
    bare,
    `decide() {
  [ "$3" = ${quote(ref)} ] || return 0
  say ${quote(`error: GH006: Protected branch update failed for ${ref}.`)} ${lines.map(quote).join(" ")}
  reason='protected branch hook declined'
}`,
  );
}

/** Who pushes, which decides GitHub's wording: apps lack a permission, tokens a scope. */
export type WorkflowPusher = "GitHub App" | "OAuth App" | "Personal Access Token";

/**
 * A push that creates or updates a file under `.github/workflows/` is refused the way GitHub
 * refuses it to a token without the workflows permission; other pushes go through, so a test can
 * show that the refusal is about the content and not the branch.
 */
export async function requireWorkflowsPermission(bare: string, pusher: WorkflowPusher = "GitHub App"): Promise<void> {
  const article = pusher === "OAuth App" ? "an" : "a";
  const needs = pusher === "GitHub App" ? "`workflows` permission" : "`workflow` scope";
  await installProcReceive(
    bare,
    `decide() {
  is_zero "$2" && return 0
  file=$(git diff --name-only "$(base_of "$1")" "$2" -- .github/workflows/ | head -n 1)
  [ -n "$file" ] || return 0
  reason=${quote(`refusing to allow ${article} ${pusher} to create or update workflow \``)}"$file"` +
      `${quote(`\` without ${needs}`)}
}`,
  );
}

/**
 * GH013 rulesets: every update of `branch` (or of any branch under `branchPrefix`, as a ruleset's
 * `refs/heads/harness/*` pattern would) is refused with the rule list GitHub prints.
 */
export async function enforceRepositoryRules(
  bare: string,
  options: { branch: string; rules?: readonly string[] } | { branchPrefix: string; rules?: readonly string[] },
): Promise<void> {
  const rules = options.rules ?? ["Cannot force-push to this branch", "Changes must be made through a pull request."];
  const repo = `${basename(dirname(bare))}/${basename(bare, ".git")}`;
  const matches =
    "branch" in options
      ? `[ "$3" = ${quote(`refs/heads/${options.branch}`)} ] || return 0`
      : `case "$3" in ${quote(`refs/heads/${options.branchPrefix}`)}*) ;; *) return 0 ;; esac`;
  const lines = [...rules.flatMap((rule) => ["", `- ${rule}`]), ""];
  await installProcReceive(
    bare,
    `decide() {
  ${matches}
  say "error: GH013: Repository rule violations found for $3." ` +
      `"Review all repository rules at https://github.com/${repo}/rules?ref=$(printf %s "$3" | sed 's#/#%2F#g')" ` +
      `${lines.map(quote).join(" ")}
  reason='push declined due to repository rule violations'
}`,
  );
}

export interface BlockSecretsOptions {
  /** Extended regular expression (for `git grep -E`) of what counts as a secret. */
  pattern?: string;
  /** The secret's type as GitHub names it in the report. */
  secretType?: string;
}

/**
 * GH013 secret-scanning push protection: a push whose tip contains a match of `pattern` is
 * refused with GitHub's report, naming the commit and `path:line` of the first match.
 */
export async function blockSecrets(bare: string, options: BlockSecretsOptions = {}): Promise<void> {
  const pattern = options.pattern ?? "ghp_[A-Za-z0-9]{36}";
  const type = options.secretType ?? "GitHub Personal Access Token";
  const dashes = "—".repeat(41);
  await installProcReceive(
    bare,
    `decide() {
  is_zero "$2" && return 0
  hit=$(git grep -n -I -E -e ${quote(pattern)} "$2" -- . | head -n 1)
  [ -n "$hit" ] || return 0
  rest=\${hit#*:}; path=\${rest%%:*}; rest=\${rest#*:}; line=\${rest%%:*}
  say "error: GH013: Repository rule violations found for $3." "" "- GITHUB PUSH PROTECTION" ${quote(`  ${dashes}`)} \\
    "    Resolve the following violations before pushing again" "" "    - Push cannot contain secrets" "" "" \\
    "     (?) Learn how to resolve a blocked push" \\
    "     https://docs.github.com/code-security/secret-scanning/working-with-secret-scanning-and-push-protection/working-with-push-protection-from-the-command-line#resolving-a-blocked-push" \\
    "" "" ${quote(`      —— ${type} ${"—".repeat(34)}`)} "       locations:" ` +
      `"         - commit: $2" "           path: $path:$line" "" \\
    "       (?) To push, remove secret from commit(s) or follow this URL to allow the secret."
  reason='push declined due to repository rule violations'
}`,
  );
}

/**
 * Installs a `proc-receive` hook for every branch. receive-pack hands it the commands over
 * pkt-line and reports its `ng <ref> <reason>` verbatim in the client's `[remote rejected]`
 * line. Refs handed to proc-receive are not updated by receive-pack, so on acceptance the hook
 * updates them itself (allowed: objects are out of quarantine by then). `decide` gets
 * `<old> <new> <ref>`, may print GitHub's messages with `say`, and refuses by setting `reason`.
 * One policy per repository: a second call replaces the first.
 */
async function installProcReceive(bare: string, decide: string): Promise<void> {
  git(bare, "config", "receive.procReceiveRefs", "refs/heads/");
  await writeHook(
    bare,
    "proc-receive",
    `#!/bin/sh
# Byte lengths: pkt-line counts bytes, and so does \${#var} in the C locale.
LC_ALL=C
export LC_ALL

is_zero() { case $1 in *[!0]*) return 1 ;; esac; return 0; }
# What a new branch is compared with: the default branch, or nothing in an empty repository.
base_of() { if is_zero "$1"; then git rev-parse -q --verify 'HEAD^{commit}' || ` +
      `git hash-object -t tree /dev/null; else echo "$1"; fi; }
say() { printf '%s\\n' "$@" >&2; }

# pkt-line: four hex digits of length (including themselves), then the payload; 0000 is a flush.
# dd reads byte by byte because a pipe may return a short read.
pkt_len() { len=$(dd bs=1 count=4 2>/dev/null); [ -n "$len" ] && [ "$len" != 0000 ]; }
pkt_body() { dd bs=1 count=$((0x$len - 4)) 2>/dev/null; }
pkt() { printf '%04x%s\\n' $((\${#1} + 5)) "$1"; }

# Version negotiation: receive-pack offers version=1 and its capabilities; we want none.
while pkt_len; do pkt_body >/dev/null; done
pkt version=1
printf 0000

commands=""
while pkt_len; do
  commands="$commands$(pkt_body)
"
done

${decide}

printf '%s' "$commands" | while read -r old new ref; do
  reason=""
  decide "$old" "$new" "$ref"
  if [ -n "$reason" ]; then
    pkt "ng $ref $reason"
  elif is_zero "$new"; then
    if git update-ref -d "$ref" "$old"; then pkt "ok $ref"; else pkt "ng $ref failed to delete"; fi
  elif git update-ref "$ref" "$new" "$old"; then
    pkt "ok $ref"
  else
    pkt "ng $ref failed to update ref"
  fi
done
printf 0000
`,
  );
}

async function writeHook(bare: string, name: string, script: string): Promise<void> {
  const path = join(bare, "hooks", name);
  await writeFile(path, script);
  await chmod(path, 0o755);
}

function quote(word: string): string {
  return shellQuote([word]);
}
