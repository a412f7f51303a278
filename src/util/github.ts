import { RepoRefError } from "./errors.js";

/** A repository on GitHub (or a GitHub Enterprise Server). */
export interface GitHubRepo {
  owner: string;
  name: string;
}

export interface ParseGitHubRepoOptions {
  /**
   * Web URL of a GitHub Enterprise Server (e.g. `https://ghe.example.com`). When given, URLs on
   * that host are accepted as well as github.com ones.
   */
  serverUrl?: string;
}

export const GITHUB_COM = "https://github.com";

// GitHub's rules: owners are letters, digits and single hyphens, at most 39 characters, not
// starting with a hyphen (managed users add `_shortcode`); names are letters, digits, `.`, `-`
// and `_`, at most 100 characters, and never `.` or `..`.
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:_[A-Za-z0-9]+)?$/;
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

const EXPECTED = "expected owner/name, https://github.com/owner/name or git@github.com:owner/name.git";

/**
 * Parses a GitHub repository reference: `owner/name`, an https URL (optionally `.git`), an SSH
 * URL (`git@host:owner/name.git` or `ssh://git@host/owner/name.git`). Hosts other than
 * github.com and the configured Enterprise server are rejected, as are local paths.
 */
export function parseGitHubRepo(ref: string, options: ParseGitHubRepoOptions = {}): GitHubRepo {
  const trimmed = ref.trim();
  if (trimmed === "") throw new RepoRefError(`The repository reference is empty (${EXPECTED})`);
  if (isLocalPath(trimmed)) {
    throw new RepoRefError(`"${ref}" is a local path, not a GitHub repository (${EXPECTED})`);
  }
  const allowedHosts = new Set(["github.com"]);
  if (options.serverUrl) allowedHosts.add(hostOf(options.serverUrl));

  // scp-like SSH syntax: [user@]host:owner/name(.git)
  const scp = /^(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!\/\/)(.+)$/.exec(trimmed);
  if (scp) {
    requireHost(scp[1] ?? "", allowedHosts, ref);
    return ownerAndName(scp[2] ?? "", ref);
  }
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(trimmed)) {
    let url: URL;
    try {
      url = new URL(trimmed);
    } catch {
      throw new RepoRefError(`"${ref}" is not a valid URL (${EXPECTED})`);
    }
    if (!["https:", "http:", "ssh:", "git:"].includes(url.protocol)) {
      throw new RepoRefError(`"${ref}" uses ${url.protocol} which is not a GitHub URL (${EXPECTED})`);
    }
    if (url.password !== "" || (url.username !== "" && url.protocol.startsWith("http"))) {
      throw new RepoRefError("Put no credentials in the repository URL; set GITHUB_TOKEN instead");
    }
    if (url.search !== "" || url.hash !== "") {
      throw new RepoRefError(`"${ref}" has a query or fragment, which a repository URL does not (${EXPECTED})`);
    }
    requireHost(url.hostname, allowedHosts, ref);
    return ownerAndName(url.pathname.replace(/^\/+/, ""), ref);
  }
  return ownerAndName(trimmed, ref);
}

/** `owner/name` → `https://github.com/owner/name.git` (or the Enterprise server's URL). */
export function githubCloneUrl(repo: GitHubRepo, serverUrl: string = GITHUB_COM): string {
  return `${serverUrl.replace(/\/+$/, "")}/${repo.owner}/${repo.name}.git`;
}

/**
 * True for references that name a directory on this machine rather than a repository on
 * GitHub: absolute or home-relative paths and `.`/`..`-relative paths.
 */
export function isLocalPath(ref: string): boolean {
  return (
    ref === "." ||
    ref === ".." ||
    ref.startsWith("/") ||
    ref.startsWith("~") ||
    ref.startsWith("./") ||
    ref.startsWith("../") ||
    /^[A-Za-z]:[\\/]/.test(ref)
  );
}

function hostOf(serverUrl: string): string {
  try {
    return new URL(serverUrl).hostname.toLowerCase();
  } catch {
    throw new RepoRefError(`The GitHub server URL "${serverUrl}" is not a valid URL`);
  }
}

function requireHost(host: string, allowed: ReadonlySet<string>, ref: string): void {
  const normalised = host.toLowerCase().replace(/^www\./, "");
  if (!allowed.has(normalised)) {
    throw new RepoRefError(
      `"${ref}" is on ${host}, ` +
        `which is not GitHub${allowed.size > 1 ? " or the configured GitHub Enterprise server" : ""} (${EXPECTED})`,
    );
  }
}

function ownerAndName(path: string, ref: string): GitHubRepo {
  const parts = path.replace(/\/+$/, "").split("/");
  if (parts.length !== 2) {
    throw new RepoRefError(`"${ref}" does not name one repository (${EXPECTED})`);
  }
  const [owner = "", rawName = ""] = parts;
  const name = rawName.endsWith(".git") ? rawName.slice(0, -".git".length) : rawName;
  if (!OWNER.test(owner)) {
    throw new RepoRefError(
      `"${owner}" is not a valid GitHub owner: use letters, digits and single hyphens, at most 39 characters`,
    );
  }
  if (!NAME.test(name) || name === "." || name === "..") {
    throw new RepoRefError(
      `"${name}" is not a valid GitHub repository name: use letters, digits, ".", "-" and "_", at most 100 characters`,
    );
  }
  return { owner, name };
}

/** A repository reference resolved to what it names: a directory here, or a GitHub repository. */
export type RepoRef = { kind: "local"; path: string } | { kind: "github"; repo: GitHubRepo };

/**
 * Decides whether `ref` is a local path or a GitHub repository, with one message for references
 * that are neither. Local paths are returned as given (not resolved or checked).
 */
export function classifyRepoRef(ref: string, options: ParseGitHubRepoOptions = {}): RepoRef {
  if (isLocalPath(ref)) return { kind: "local", path: ref };
  try {
    return { kind: "github", repo: parseGitHubRepo(ref, options) };
  } catch (error) {
    if (error instanceof RepoRefError) {
      throw new RepoRefError(
        `"${ref}" is neither a local path (start it with ./ or /) nor a GitHub repository: ${error.message}`,
      );
    }
    throw error;
  }
}
