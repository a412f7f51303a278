import type { PushErrorKind } from "../contracts/types.js";
import { redact } from "../util/redact.js";

/**
 * Why a `git push` to GitHub failed, in terms a user can act on. Harness reports a failed push
 * on the issue; a raw git transcript ("error: failed to push some refs") tells a maintainer
 * nothing about whether to fix a permission, a branch rule or their network. The kinds are
 * the contract's (`PushErrorKind`), less `missing_token`, which never reaches git.
 */
export type PushFailureKind = Exclude<PushErrorKind, "missing_token">;

export interface ClassifiedPushError {
  kind: PushFailureKind;
  /** One line saying what GitHub refused, with the facts from the output (branch, file, identity). */
  summary: string;
  /** One line saying what the user should do about it. */
  remedy: string;
}

/** Facts quoted from git output are clipped so that one summary stays one readable line. */
const MAX_FACT_LENGTH = 200;

const REMEDY = {
  auth: "The token expired or is invalid: re-run to get a fresh installation token, or set a valid GITHUB_TOKEN",
  saml: "Authorize the token for the organization's SAML single sign-on, or use the app's installation token",
  appWorkflows:
    "Grant the app the Workflows: write permission, or ask for a change that does not touch .github/workflows/",
  tokenWorkflows: "Use a token with the `workflow` scope, or ask for a change that does not touch .github/workflows/",
  protectedBranch:
    "Push to a branch that is not protected (Harness opens a pull request from it), " +
    "or ask a repository admin to let the app bypass the protection",
  rulesets: "Ask a repository admin to let the app bypass the ruleset, or to exclude Harness's branches from it",
  secrets:
    "Remove the secret from the change so no commit contains it (and rotate it if it is real); " +
    "allow it through GitHub's push-protection link only if it is a false positive",
  emailPrivacy:
    "Commit with a GitHub noreply email address, or turn off " +
    '"Block command line pushes that expose my email" in the account\'s email settings',
  nonFastForward: "The branch moved on the remote: re-run /harness so it starts from the latest commit",
  fileTooLarge: "Remove the large file from the commits (or track it with Git LFS), then re-run /harness",
  pushTooLarge: "Make the change smaller (large binaries belong in Git LFS), then re-run /harness",
  notFound:
    "Check the repository name, and that the GitHub App is installed on it: " +
    'GitHub answers "not found" for private repositories the token cannot see',
  archived: "Unarchive the repository in its settings, or run Harness on a repository that is not archived",
  network: "Could not reach GitHub: check connectivity (DNS, proxy, firewall) and retry",
  unknown: "Read the git output in the run log; if the failure looks transient, re-run /harness",
} as const;

/**
 * Turns the combined stdout/stderr of a failed `git push` into a kind, a summary and a remedy.
 *
 * Pure and total: any text yields an answer, falling back to `unknown` with the last meaningful
 * line, because a classifier that throws would hide the very error it was asked to explain.
 * The output is redacted before anything is read from it, so no fact quoted in the summary can
 * carry a credential. `secrets` adds exact values (e.g. the token used for this push) to the
 * shapes `redact` already recognises.
 */
export function classifyPushError(gitOutput: string, secrets: Iterable<string | undefined> = []): ClassifiedPushError {
  const output = parse(redact(gitOutput, secrets));
  // Order matters: the most specific evidence wins. A policy refusal names its own rule, while
  // the generic markers it shares with other classes ("[remote rejected]", an HTTP status, a
  // `fatal:` line) must not decide the answer.
  for (const rule of RULES) {
    const result = rule(output);
    if (result) return result;
  }
  return unknownError(output);
}

/**
 * The error to show when Harness declines to push a change that touches workflow files
 * because its token cannot write them: GitHub would refuse the whole push anyway, and failing
 * first names the files instead of leaving the user to decode a `[remote rejected]` line.
 */
export function workflowPermissionError(files: readonly string[]): ClassifiedPushError {
  const shown = files.slice(0, 3).map((file) => clip(redact(file)));
  const more = files.length > shown.length ? ` and ${String(files.length - shown.length)} more` : "";
  const what = shown.length > 0 ? `${shown.join(", ")}${more}` : "files under .github/workflows/";
  return {
    kind: "workflows",
    summary:
      `The change creates or updates workflow files (${what}), ` +
      `which the GitHub App cannot push without the Workflows permission`,
    remedy: REMEDY.appWorkflows,
  };
}

// ---------------------------------------------------------------------------------------------

interface RefStatus {
  /** `rejected` is decided by the client (e.g. non-fast-forward); `remote rejected` by the server. */
  status: "rejected" | "remote rejected";
  /** Destination branch, without `refs/heads/`. */
  branch: string;
  reason: string;
}

interface ParsedOutput {
  /** Every line, with git's sideband padding and ANSI clear-to-end-of-line removed. */
  lines: string[];
  /** Text of the server's lines: `remote:` (HTTP, sideband) and `ERROR:` (SSH) without the prefix. */
  server: string[];
  refs: RefStatus[];
}

function parse(text: string): ParsedOutput {
  // git pads non-empty sideband lines with ESC[K on a tty and with 8 spaces otherwise; progress
  // lines end in \r. Neither is part of the message.
  const lines = text
    .replaceAll("\u001b[K", "")
    .split(/\r\n|\r|\n/)
    .map((line) => line.trimEnd());
  const server: string[] = [];
  const refs: RefStatus[] = [];
  for (const line of lines) {
    const remote = /^(?:remote:|ERROR:)\s?(.*)$/.exec(line);
    if (remote) server.push(remote[1] ?? "");
    const ref = parseRefStatus(line);
    if (ref) refs.push(ref);
  }
  return { lines, server, refs };
}

/** Both the human form (` ! [remote rejected] HEAD -> main (reason)`) and `--porcelain`'s. */
function parseRefStatus(line: string): RefStatus | undefined {
  const human = /^\s*!\s*\[(remote rejected|rejected)\]\s+\S+ -> (\S+) \((.*)\)$/.exec(line);
  const porcelain = /^!\s+\S*:(\S+)\s+\[(remote rejected|rejected)\] \((.*)\)$/.exec(line);
  if (human) return refStatus(human[1], human[2], human[3]);
  if (porcelain) return refStatus(porcelain[2], porcelain[1], porcelain[3]);
  return undefined;
}

function refStatus(status: string | undefined, ref: string | undefined, reason: string | undefined): RefStatus {
  return {
    status: status === "rejected" ? "rejected" : "remote rejected",
    branch: (ref ?? "").replace(/^refs\/heads\//, ""),
    reason: reason ?? "",
  };
}

type Rule = (output: ParsedOutput) => ClassifiedPushError | undefined;

const RULES: readonly Rule[] = [
  workflows,
  fileTooLarge,
  secretScanning,
  repositoryRules,
  emailPrivacy,
  protectedBranch,
  nonFastForward,
  // The auth-stage answers come as an HTTP body shown as `remote:` lines (or SSH `ERROR:`) and
  // a `fatal:` line. Archived and not-found share 403/404 with plainer causes, so go first.
  archived,
  notFound,
  auth,
  permission,
  rpcHttpStatus,
  network,
  otherRemoteRejection,
];

function workflows(output: ParsedOutput): ClassifiedPushError | undefined {
  for (const ref of output.refs) {
    const match = new RegExp(
      "refusing to allow (an? (.+?)) to create or update workflow `([^`]*)` " +
        "without `(workflows?)` (permission|scope)",
    ).exec(ref.reason);
    if (!match) continue;
    const [, who = "the token", actor = "", file = "a workflow file", needs = "workflows", grant = "permission"] =
      match;
    return {
      kind: "workflows",
      summary:
        `GitHub rejected the push to ${ref.branch}: it creates or updates ${clip(file)}, ` +
        `and ${who} needs the \`${needs}\` ${grant} for that`,
      remedy: actor === "GitHub App" ? REMEDY.appWorkflows : REMEDY.tokenWorkflows,
    };
  }
  return undefined;
}

function fileTooLarge(output: ParsedOutput): ClassifiedPushError | undefined {
  const files = output.server.flatMap((line) => {
    const match = /File (.+) is ([\d.]+ [KMG]B); this exceeds GitHub's file size limit of ([\d.]+ [KMG]B)/.exec(line);
    return match ? [{ file: match[1] ?? "", size: match[2] ?? "", limit: match[3] ?? "" }] : [];
  });
  const first = files[0];
  if (first) {
    const more = files.length > 1 ? ` (and ${String(files.length - 1)} more over the limit)` : "";
    return {
      kind: "file_too_large",
      summary:
        `GitHub rejected the push: ${clip(first.file)} is ${first.size}, ` +
        `over GitHub's file size limit of ${first.limit}${more}`,
      remedy: REMEDY.fileTooLarge,
    };
  }
  if (output.server.some((line) => /\bGH001\b/.test(line))) {
    return {
      kind: "file_too_large",
      summary: "GitHub rejected the push: a file exceeds GitHub's file size limit (GH001)",
      remedy: REMEDY.fileTooLarge,
    };
  }
  return undefined;
}

function secretScanning(output: ParsedOutput): ClassifiedPushError | undefined {
  const protection = output.server.findIndex((line) => /PUSH PROTECTION|Push cannot contain secrets/i.test(line));
  if (protection === -1) return undefined;
  // Each finding is a `—— <type> ——…` rule line followed by `locations:` and `path: <file>:<line>`.
  const findings: string[] = [];
  for (const [index, line] of output.server.entries()) {
    const type = /^\s*—+\s+([^—]+?)\s+—+$/.exec(line);
    if (!type?.[1] || index < protection) continue;
    const path = output.server
      .slice(index + 1, index + 6)
      .map((next) => /^\s*path:\s*(\S+)/.exec(next)?.[1])
      .find(Boolean);
    findings.push(path ? `${type[1]} at ${path}` : type[1]);
  }
  const detail = findings.length > 0 ? ` (${clip(findings.join("; "))})` : "";
  return {
    kind: "repository_rules",
    summary: `GitHub push protection blocked the push to ${branchOf(output)}: the commits contain a secret${detail}`,
    remedy: REMEDY.secrets,
  };
}

function repositoryRules(output: ParsedOutput): ClassifiedPushError | undefined {
  const byReason = output.refs.some((ref) => ref.reason.includes("repository rule violations"));
  const header = output.server.findIndex((line) => /\bGH013\b/.test(line));
  if (!byReason && header === -1) return undefined;
  const rules = header === -1 ? "" : bullets(output.server.slice(header + 1));
  return {
    kind: "repository_rules",
    summary: `GitHub rejected the push: repository rules block updates to ${branchOf(output)}${rules}`,
    remedy: REMEDY.rulesets,
  };
}

function emailPrivacy(output: ParsedOutput): ClassifiedPushError | undefined {
  const hit =
    output.refs.some((ref) => ref.reason.includes("email privacy restrictions")) ||
    output.server.some((line) => /\bGH007\b/.test(line));
  if (!hit) return undefined;
  // Not a ruleset, but the same kind of refusal: a repository/account policy rejected the
  // commits' content, and re-running unchanged will not help.
  return {
    kind: "repository_rules",
    summary: `GitHub rejected the push to ${branchOf(output)}: a commit would publish a private email address (GH007)`,
    remedy: REMEDY.emailPrivacy,
  };
}

function protectedBranch(output: ParsedOutput): ClassifiedPushError | undefined {
  const byReason = output.refs.some((ref) => ref.reason === "protected branch hook declined");
  const header = output.server.findIndex((line) => /\bGH006\b/.test(line));
  if (!byReason && header === -1) return undefined;
  const rules = header === -1 ? "" : bullets(output.server.slice(header + 1));
  return {
    kind: "protected_branch",
    summary: `GitHub rejected the push: ${branchOf(output)} is a protected branch${rules}`,
    remedy: REMEDY.protectedBranch,
  };
}

function nonFastForward(output: ParsedOutput): ClassifiedPushError | undefined {
  // Decided by the client from the advertised refs, so only the status line is reliable; the
  // hint wording changes between git versions.
  const ref = output.refs.find((candidate) => /^(?:fetch first|non-fast-forward|stale info)$/.test(candidate.reason));
  if (!ref) return undefined;
  return {
    kind: "non_fast_forward",
    summary:
      `GitHub rejected the push: ${ref.branch} has commits on GitHub ` +
      `that the pushed branch does not include (${ref.reason})`,
    remedy: REMEDY.nonFastForward,
  };
}

function archived(output: ParsedOutput): ClassifiedPushError | undefined {
  if (!output.server.some((line) => line.includes("archived so it is read-only"))) return undefined;
  return {
    kind: "archived",
    summary: `GitHub rejected the push: ${repoOf(output) ?? "the repository"} is archived, so it is read-only`,
    remedy: REMEDY.archived,
  };
}

function notFound(output: ParsedOutput): ClassifiedPushError | undefined {
  const fatal = output.lines.some((line) => /^fatal: repository '.*' not found$/.test(line));
  const body = output.server.some((line) => /^(?:Repository not found\.|Not Found)$/.test(line.trim()));
  const rpc = output.lines.some((line) => /RPC failed; HTTP 404\b/.test(line));
  if (!fatal && !body && !rpc) return undefined;
  return {
    kind: "not_found",
    summary:
      `GitHub could not find ${repoOf(output) ?? "the repository"}: ` + `it does not exist, or the token cannot see it`,
    remedy: REMEDY.notFound,
  };
}

function auth(output: ParsedOutput): ClassifiedPushError | undefined {
  const saml = output.server.find((line) => /SAML SSO/i.test(line));
  if (saml) return { kind: "auth", summary: `GitHub refused the token: ${clip(saml.trim())}`, remedy: REMEDY.saml };
  const body = output.server.find((line) =>
    /Invalid username or (?:password|token)|password authentication was removed|Bad credentials/i.test(line),
  );
  // With the token in an `http.extraHeader` (as Harness passes it) git has no credentials of its
  // own when GitHub answers 401, so it tries to prompt instead of showing GitHub's body.
  const prompt = output.lines.find((line) => /could not read (?:Username|Password) for '([^']*)'/.test(line));
  const failed = output.lines.find((line) => /Authentication failed for '/.test(line));
  const status = output.lines.find((line) => /returned error: 401\b|RPC failed; HTTP 401\b/.test(line));
  const publicKey = output.lines.find((line) => /Permission denied \(publickey/.test(line));
  if (!body && !prompt && !failed && !status && !publicKey) return undefined;
  const where = repoOf(output) ?? hostOf(prompt) ?? "GitHub";
  const detail = body
    ? ` (${clip(body.trim())})`
    : prompt
      ? " (the token was missing or rejected)"
      : publicKey
        ? " (SSH key rejected)"
        : "";
  return { kind: "auth", summary: `GitHub rejected the credentials for ${where}${detail}`, remedy: REMEDY.auth };
}

function permission(output: ParsedOutput): ClassifiedPushError | undefined {
  for (const line of output.server) {
    const denied = /Permission to (\S+?)(?:\.git)? denied to (\S+?)\.?$/.exec(line.trim());
    if (denied) {
      const [, repo = "the repository", who = "the token"] = denied;
      return {
        kind: "permission",
        summary: `GitHub rejected the push: ${clip(who)} has no write access to ${clip(repo)}`,
        remedy: permissionRemedy(who, repo),
      };
    }
    if (/Write access to repository not granted/i.test(line)) {
      const repo = repoOf(output) ?? "the repository";
      return {
        kind: "permission",
        summary: `GitHub rejected the push: the token has no write access to ${repo}`,
        remedy: permissionRemedy(undefined, repo),
      };
    }
  }
  if (!output.lines.some((line) => /returned error: 403\b|RPC failed; HTTP 403\b/.test(line))) return undefined;
  const repo = repoOf(output) ?? "the repository";
  const body = output.server.find((line) => line.trim() !== "");
  const detail = body ? ` (${clip(body.trim())})` : "";
  return {
    kind: "permission",
    summary: `GitHub refused access to ${repo} (HTTP 403)${detail}`,
    remedy: permissionRemedy(undefined, repo),
  };
}

function permissionRemedy(who: string | undefined, repo: string): string {
  if (who?.endsWith("[bot]")) {
    return (
      `Install the app on ${repo} and grant it the Contents: write permission ` +
      `(a maintainer must accept new permissions)`
    );
  }
  return (
    `Use a token with write access to ${repo}: a GitHub App needs Contents: write, ` +
    `a fine-grained token Contents: read and write, a classic token the repo scope`
  );
}

/**
 * A failure of the pack upload (the POST) hides GitHub's body and reports only the status, as
 * `error: RPC failed; HTTP <status>`. 401/403/404 are handled with their classes above.
 */
function rpcHttpStatus(output: ParsedOutput): ClassifiedPushError | undefined {
  const line = output.lines.find((candidate) => /RPC failed; HTTP 413\b/.test(candidate));
  if (!line) return undefined;
  return {
    kind: "file_too_large",
    summary: "GitHub rejected the push: the pack is too large to upload (HTTP 413)",
    remedy: REMEDY.pushTooLarge,
  };
}

const NETWORK_PATTERNS: readonly RegExp[] = [
  /Could not resolve (?:host|proxy)/i,
  /Failed to connect to/i,
  /Failed connect to/i,
  /timed out/i,
  /Connection (?:was )?(?:reset|refused|aborted|closed)/i,
  /Connection reset by peer/i,
  /No route to host/i,
  /Network is unreachable/i,
  /OpenSSL|SSL_|SSL certificate|SSL connect|gnutls_handshake|\bTLS\b/,
  /returned error: 5\d\d\b/,
  /RPC failed/,
  /remote end hung up unexpectedly/i,
  /unexpected disconnect while reading sideband packet/,
  /HTTP\/2 stream \d+ was not closed cleanly/,
  /ssh: connect to host/,
];

function network(output: ParsedOutput): ClassifiedPushError | undefined {
  // Only git's own lines: a server message that happens to say "timed out" is not a network error.
  const line = output.lines.find(
    (candidate) => !candidate.startsWith("remote:") && NETWORK_PATTERNS.some((pattern) => pattern.test(candidate)),
  );
  if (!line) return undefined;
  const access = /^fatal: unable to access '([^']*)': (.+)$/.exec(line);
  const fact = access ? `${stripUrl(access[1] ?? "")}: ${access[2] ?? ""}` : line.replace(/^(?:fatal|error): /, "");
  return { kind: "network", summary: `Could not push to GitHub: ${clip(fact)}`, remedy: REMEDY.network };
}

/** A server refusal whose reason we do not know: the reason itself is the most useful fact. */
function otherRemoteRejection(output: ParsedOutput): ClassifiedPushError | undefined {
  const ref = output.refs.find((candidate) => candidate.status === "remote rejected");
  if (!ref) return undefined;
  const message = output.server
    .find((line) => /^error: /.test(line.trim()))
    ?.trim()
    .replace(/^error: /, "");
  const detail = message ? `: ${clip(message)}` : "";
  return {
    kind: "unknown",
    summary: `GitHub rejected the push to ${ref.branch} (${clip(ref.reason)})${detail}`,
    remedy: REMEDY.unknown,
  };
}

/** Lines that say nothing about the failure: progress, hints, and git's own framing. */
const NOISE = [
  /^$/,
  /^hint:/,
  /^remote:\s*$/,
  /^Everything up-to-date$/,
  /^Done$/,
  /^To \S+$/,
  /^Pushing to /,
  /^error: failed to push some refs/,
  /^(?:remote: )?(?:Enumerating|Counting|Compressing|Writing|Resolving|Delta compression|Total \d)/,
];

function unknownError(output: ParsedOutput): ClassifiedPushError {
  const last = output.lines.filter((line) => !NOISE.some((pattern) => pattern.test(line.trim()))).at(-1);
  return {
    kind: "unknown",
    summary: last ? `git push failed: ${clip(last.trim())}` : "git push failed without an error message",
    remedy: REMEDY.unknown,
  };
}

// ---------------------------------------------------------------------------------------------

/**
 * The rule texts listed under a GH006/GH013 header: the current format has `- ` bullets after a
 * blank line, the older one `error: <rule>` lines. Stops at the next block so a second header
 * or a secret-scanning section does not leak in.
 */
function bullets(lines: readonly string[]): string {
  const rules: string[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (/\bGH\d{3}\b/.test(line)) break;
    const rule = /^(?:-|error:)\s+(.+)$/.exec(line)?.[1];
    if (rule) rules.push(rule.replace(/\s*Visit https?:\/\/\S+ for more information\.?$/, "").replace(/\.$/, ""));
  }
  return rules.length > 0 ? ` (${clip(rules.join("; "))})` : "";
}

/** The branch the refusal is about: from the status line, else from a `... for refs/heads/x.` header. */
function branchOf(output: ParsedOutput): string {
  const ref = output.refs.find((candidate) => candidate.status === "remote rejected") ?? output.refs[0];
  if (ref && ref.branch !== "") return ref.branch;
  for (const line of output.server) {
    const header = /for refs\/heads\/(\S+?)\.?$/.exec(line.trim());
    if (header?.[1]) return header[1];
  }
  return "the branch";
}

/** `owner/name` from the URLs git prints (`fatal: ... '<url>/'`, `To <url>`), HTTPS or SSH. */
function repoOf(output: ParsedOutput): string | undefined {
  for (const line of output.lines) {
    if (!/^(?:fatal:|To |error: failed to push)/.test(line)) continue;
    const match =
      /(?:[a-z]+:\/\/[^/\s']+\/|[\w.-]+@[\w.-]+:|^To [\w.-]+:)([\w.-]+\/[\w.-]+?)(?:\.git)?\/?(?:'|\s|$)/.exec(line);
    if (match?.[1]) return match[1];
  }
  return undefined;
}

function hostOf(line: string | undefined): string | undefined {
  const url = line ? /'([a-z]+:\/\/[^/']+)/.exec(line)?.[1] : undefined;
  return url ? stripUrl(url) : undefined;
}

/** git always ends the URL in `fatal:` lines with `/`, which reads oddly in a sentence. */
function stripUrl(url: string): string {
  return url.replace(/\/$/, "");
}

function clip(text: string): string {
  return text.length > MAX_FACT_LENGTH ? `${text.slice(0, MAX_FACT_LENGTH - 1)}…` : text;
}
