import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecResult, PushErrorKind } from "../contracts/types.js";
import { classifyPushError } from "../github/push-errors.js";
import type { Sandbox } from "../sandbox/types.js";
import { runProcess } from "../sandbox/process.js";
import { describeError } from "../util/errors.js";
import { BundleFormatError, readBundleHeader, type BundleHeader } from "./bundle-header.js";
import { scanPack } from "./pack-scan.js";
import { checkObjectSizes, formatSize } from "./result-objects.js";
import { fsckImportedPacks, packsIn } from "./result-fsck.js";
import { checkChangedPaths } from "./result-paths.js";
import {
  hostGit,
  hostGitEnv,
  hostGitOrThrow,
  SANDBOX_GIT_SAFETY,
  tokenHeaderConfig,
  transportOf,
  type GitTransport,
  type HostGitOptions,
} from "./safe-git.js";
import { maskSecrets, type KnownSecret, type SecretFinding } from "./secret-scan.js";
import { scanForSecretsInWorker } from "./secret-scan-thread.js";

/** Largest result a run may hand out of its sandbox, in bytes (a bundle of its new commits). */
export const MAX_RESULT_BYTES = 100 * 1024 * 1024;
/** Most commits one run may add on top of its base. The harness makes one; slack for follow-ups. */
export const MAX_RESULT_COMMITS = 50;
/** The change is read whole to look for secrets; a larger diff is refused rather than half-read. */
export const MAX_SCANNED_DIFF_BYTES = 32 * 1024 * 1024;
/**
 * Largest object (a file's contents) a result may add, in bytes, and what all its new objects may
 * come to together (the secret scan's budget): both read from object headers before any diff.
 */
export const MAX_RESULT_OBJECT_BYTES = 16 * 1024 * 1024;
/**
 * While the bundle is made and imported, objects above this stream through git rather than being
 * held whole (git's own threshold is 512 MiB, so an agent's 500 MiB file would cost as much
 * memory in each). Only for those two: for a diff it would mean "binary".
 */
const STREAMING_THRESHOLD = "1m";
/** Most bytes a result's objects may inflate to (bounds the work of reading a compressed flood). */
const MAX_RESULT_INFLATED_BYTES = 2 * 1024 * 1024 * 1024;
/** Longest a host git command that moves the result may take. */
const DELIVERY_TIMEOUT_MS = 300_000;
/** Most objects a result's pack may hold. */
const MAX_RESULT_OBJECTS = 1_000_000;
/** Largest patch kept in a report when a push does not happen: 256 KiB. */
export const MAX_PATCH_BYTES = 256 * 1024;

/** Prefix of the host-side delivery directories (not `harness-`: those are sandboxes the reaper owns). */
export const DELIVERY_DIR_PREFIX = "harness-delivery-";

export interface DeliveryRequest {
  sandbox: Sandbox;
  runId: string;
  /** The commit the run started from, read before any step ran. */
  baseSha: string;
  /** The commit the sandbox says holds the run's change: a claim, checked against the bundle. */
  commitSha: string;
  /** The branch the harness chose; the only ref the push writes. */
  branch: string;
  /** Where the harness chose to push (never read from the sandbox). */
  pushUrl: string;
  /**
   * `pushUrl` is the repository on this machine the run was cloned from, and the branch is
   * written into it rather than pushed: it lends its objects (nothing is fetched), and the commit
   * is fetched into it under the harness's settings, so none of its hooks run for the harness.
   */
  intoLocalRepository?: boolean;
  /** The write credential. It reaches the host-side fetch and push processes only. */
  token: string;
  /** The commit the host writes around the result's tree: its message and who it is by. */
  commit: { message: string; identity: { name: string; email: string }; now?: Date };
  /** Values that must never leave in a push, with the name shown when one is found. */
  secrets: readonly KnownSecret[];
  redact: (text: string) => string;
  signal?: AbortSignal;
  /** Largest bundle accepted (default `MAX_RESULT_BYTES`). */
  maxResultBytes?: number;
}

export type DeliveryOutcome =
  | { delivered: true; commitSha: string; diffstat: string }
  | {
      delivered: false;
      kind: PushErrorKind;
      error: string;
      remedy: string;
      diffstat?: string;
      patch?: string;
      findings?: SecretFinding[];
      commitSha?: string;
    };

/**
 * The write path. The sandbox hands its result out as data (a git bundle of the new commits);
 * on this host, in a repository the harness owns, the bundle is checked (its header says exactly
 * one result descending from the run's base; objects fsck'ed; every new commit descends from
 * the base; size bounded). The host then writes the run's commit itself — the result's tree on
 * the base, with the harness's message and identity — so nothing but file contents comes from
 * the sandbox, scans that change for secrets, and only then pushes that one commit to the one
 * branch it chose. Nothing in the sandbox — hooks, config, remotes, credential helpers — takes
 * part, and the token never enters it.
 */
export async function deliverRun(request: DeliveryRequest): Promise<DeliveryOutcome> {
  const dir = await mkdtemp(join(tmpdir(), DELIVERY_DIR_PREFIX));
  const gitDir = join(dir, "repo.git");
  try {
    return await deliverIn(dir, gitDir, request);
  } finally {
    await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  }
}

async function deliverIn(dir: string, gitDir: string, request: DeliveryRequest): Promise<DeliveryOutcome> {
  const transport = transportOf(request.pushUrl);
  if (!transport)
    return refused(
      "unknown",
      `the push address is not one Harness pushes to (${request.redact(request.pushUrl)})`,
      "Use an https address for the repository",
    );
  const withToken = (transports: readonly GitTransport[]) => ({
    transports,
    config: tokenHeaderConfig(request.token),
    ...(request.signal ? { signal: request.signal } : {}),
  });

  // The bundle is copied to a host file here (in a folder only the harness can write), counted
  // as it arrives; from then on everything is read from that copy, never from the sandbox again.
  const bundlePath = join(dir, "result.bundle");
  try {
    await exportBundle(request, bundlePath);
  } catch (error) {
    return refused(
      "unverified",
      `the run's result could not be taken out of the sandbox: ${request.redact(describeError(error))}`,
      REMEDY_UNVERIFIED,
    );
  }
  const header = await checkHeader(bundlePath, request);
  if (typeof header === "string")
    return refused("unverified", `the run's result failed verification: ${header}`, REMEDY_UNVERIFIED);
  // What git would have to build, from the pack's own headers, before git reads any of it.
  const pack = await scanPack(bundlePath, header.packOffset, {
    maxObjectBytes: MAX_RESULT_OBJECT_BYTES,
    maxInflatedBytes: MAX_RESULT_INFLATED_BYTES,
    maxObjects: MAX_RESULT_OBJECTS,
  });
  if (pack) return refusedAsLarge(pack, request);

  await hostGitOrThrow(dir, "Creating the delivery repository", ["init", "--quiet", "--bare", gitDir], {
    timeout: 30_000,
  });

  if (request.intoLocalRepository) {
    const problem = await borrowObjects(gitDir, request.pushUrl, request.baseSha);
    if (problem)
      return refused(
        "not_found",
        `could not read the run's base commit: ${request.redact(problem)}`,
        REMEDY_LOCAL_BASE,
      );
  } else {
    const problem = await fetchBase(gitDir, request, withToken([transport]));
    if (problem) return problem;
  }
  const packsBefore = await packsIn(gitDir);
  const imported = await hostGit(gitDir, ["fetch", "--quiet", "--no-tags", bundlePath, "HEAD:refs/harness/result"], {
    ...withToken([transport, "file"]),
    config: [...tokenHeaderConfig(request.token), ["core.bigFileThreshold", STREAMING_THRESHOLD]],
    timeout: 300_000,
  });
  if (imported.exitCode !== 0) {
    return refused(
      "unverified",
      `the run's result failed verification: its objects did not check out ` +
        `(${request.redact(lastLine(imported.stderr))})`,
      REMEDY_UNVERIFIED,
    );
  }
  // Sizes first, from object headers: nothing below reads a blob before they are known.
  const sizes = await checkObjectSizes(gitDir, request.baseSha, "refs/harness/result", {
    maxObjectBytes: MAX_RESULT_OBJECT_BYTES,
    maxTotalBytes: MAX_SCANNED_DIFF_BYTES,
  });
  if (!sizes.ok) return refusedAsLarge(sizes, request);
  const objectProblem =
    (await fsckImportedPacks(dir, gitDir, packsBefore)) ??
    (await checkChangedPaths(gitDir, request.baseSha, "refs/harness/result"));
  if (objectProblem)
    return refused(
      "unverified",
      `the run's result failed verification: ${request.redact(objectProblem)}`,
      REMEDY_UNVERIFIED,
    );

  const ancestry = await checkAncestry(gitDir, request);
  if (ancestry) return refused("unverified", `the run's result failed verification: ${ancestry}`, REMEDY_UNVERIFIED);

  const commitSha = await writeCommit(gitDir, request);
  const [diff, stat] = await Promise.all([
    hostGit(
      gitDir,
      ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--text", "-U0", request.baseSha, commitSha],
      { ...withToken([transport]), maxOutput: MAX_SCANNED_DIFF_BYTES },
    ),
    hostGit(gitDir, ["diff", "--no-color", "--stat", request.baseSha, commitSha], withToken([transport])),
  ]);
  const diffstat = request.redact(stat.stdout.trim());
  if (diff.exitCode !== 0 || diff.truncated) {
    return refused(
      "unverified",
      `the change is too large to check for secrets (over ${formatSize(MAX_SCANNED_DIFF_BYTES)} of diff)`,
      "Make the change smaller (large binaries belong in Git LFS), then ask again",
      { diffstat },
    );
  }
  const scan = await scanForSecretsInWorker({
    patch: diff.stdout,
    messages: [request.commit.message],
    secrets: request.secrets,
  });
  if (!scan.ok) return refused("unverified", scan.error, scan.remedy, { diffstat });
  const findings = scan.findings;
  if (findings.length > 0) {
    const patch = maskSecrets(
      await formatPatch(gitDir, request.baseSha, commitSha, withToken([transport])),
      request.secrets,
    );
    return refused(
      "secret_in_change",
      `the change contains ${describeFindings(findings)}, so Harness did not push it`,
      "Remove the secret from the change (and rotate it if it is real), then ask again; " +
        "the change is kept below with the secret masked",
      { diffstat, patch: request.redact(patch), findings },
    );
  }

  const pushed = request.intoLocalRepository
    ? await writeLocalBranch(gitDir, request.pushUrl, commitSha, request)
    : await hostGit(
        gitDir,
        ["push", "--porcelain", "--no-verify", request.pushUrl, `${commitSha}:refs/heads/${request.branch}`],
        withToken([transport]),
      );
  if (pushed.exitCode !== 0) {
    const classified = request.intoLocalRepository
      ? localWriteError(pushed, request.branch, request.pushUrl)
      : classifyPushError(`${pushed.stderr}\n${pushed.stdout}`, [request.token]);
    const patch = maskSecrets(
      await formatPatch(gitDir, request.baseSha, commitSha, withToken([transport])),
      request.secrets,
    );
    const what = request.intoLocalRepository ? "writing the branch failed" : "git push failed";
    return refused(classified.kind, `${what}: ${classified.summary}`, classified.remedy, {
      diffstat,
      patch: request.redact(patch),
      commitSha,
    });
  }
  return { delivered: true, commitSha, diffstat };
}

/**
 * The base commit and its trees from the repository pushed to, so the push can negotiate; blobs
 * come on demand (a partial clone), only those the bundle's deltas or the diff need, so a large
 * repository's whole tree is not downloaded for a one-file change. The remote's address is in
 * our own repo's config; its credential stays in the environment of the processes that use it.
 * Missing delta bases are fetched from this promisor remote while the bundle's pack is indexed.
 */
async function fetchBase(
  gitDir: string,
  request: DeliveryRequest,
  options: HostGitOptions,
): Promise<DeliveryOutcome | undefined> {
  await hostGitOrThrow(gitDir, "Preparing the delivery repository", ["remote", "add", "origin", request.pushUrl], {
    timeout: 30_000,
    redact: request.redact,
  });
  for (const [key, value] of [
    ["remote.origin.promisor", "true"],
    ["remote.origin.partialclonefilter", "blob:none"],
    ["extensions.partialClone", "origin"],
  ] as const) {
    await hostGitOrThrow(gitDir, "Preparing the delivery repository", ["config", key, value], { timeout: 30_000 });
  }
  const base = await hostGit(
    gitDir,
    ["fetch", "--quiet", "--no-tags", "--depth=1", "--filter=blob:none", "origin", request.baseSha],
    options,
  );
  if (base.exitCode === 0) return undefined;
  const classified = classifyPushError(`${base.stderr}\n${base.stdout}`, [request.token]);
  return refused(
    classified.kind,
    `could not fetch the run's base commit from the repository: ${classified.summary}`,
    classified.remedy,
  );
}

/**
 * A repository on this machine lends the delivery repository its objects (git's alternates)
 * rather than being fetched from: the base and all its history are there already, and only what
 * the run added is written back. Returns what is wrong when its base commit cannot be read.
 */
async function borrowObjects(gitDir: string, repository: string, baseSha: string): Promise<string | undefined> {
  const common = await runProcess({
    argv: ["git", "-C", repository, "rev-parse", "--path-format=absolute", "--git-common-dir"],
    cwd: gitDir,
    env: hostGitEnv(),
    timeout: 30_000,
  });
  if (common.exitCode !== 0) return `${repository} is not a git repository (${lastLine(common.stderr)})`;
  await writeFile(join(gitDir, "objects", "info", "alternates"), `${join(common.stdout.trim(), "objects")}\n`);
  const base = await hostGit(gitDir, ["cat-file", "-e", `${baseSha}^{commit}`], { timeout: 30_000 });
  return base.exitCode === 0 ? undefined : `${repository} no longer has commit ${baseSha.slice(0, 12)}`;
}

/**
 * The commit fetched into a repository on this machine as the run's branch, rather than pushed:
 * git clears a push's configuration from the receiving side's environment, so the receiving
 * repository's hooks would run, where a fetch runs in that repository under the harness's own
 * settings (no hooks, objects checked). Without a `+` the branch only moves forward, and git
 * refuses to move a branch that is checked out there.
 */
async function writeLocalBranch(
  gitDir: string,
  repository: string,
  commitSha: string,
  request: DeliveryRequest,
): Promise<ExecResult> {
  await hostGitOrThrow(gitDir, "Preparing the local branch", ["update-ref", "refs/harness/commit", commitSha], {
    timeout: 30_000,
  });
  return runProcess({
    argv: [
      "git",
      "-C",
      repository,
      "fetch",
      "--no-tags",
      "--no-write-fetch-head",
      gitDir,
      `refs/harness/commit:refs/heads/${request.branch}`,
    ],
    cwd: gitDir,
    env: hostGitEnv({ transports: ["file"] }),
    timeout: DELIVERY_TIMEOUT_MS,
    ...(request.signal ? { signal: request.signal } : {}),
  });
}

/** Why git would not write the branch into a repository on this machine, said for its owner. */
function localWriteError(
  result: ExecResult,
  branch: string,
  repository: string,
): { kind: PushErrorKind; summary: string; remedy: string } {
  const output = `${result.stderr}\n${result.stdout}`;
  if (/non-fast-forward|\[rejected\]/.test(output))
    return {
      kind: "non_fast_forward",
      summary:
        `branch ${branch} in ${repository} moved while the run worked, ` + "and the run's commit does not build on it",
      remedy: "Nothing of yours was changed. Run again with another --branch, or merge the patch below yourself",
    };
  if (/refusing to fetch into branch/.test(output))
    return {
      kind: "protected_branch",
      summary: `branch ${branch} is checked out in ${repository}, and git does not move a checked-out branch`,
      remedy: "Switch that checkout to another branch, or run again with another --branch",
    };
  return {
    kind: "unknown",
    summary: lastLine(result.stderr || result.stdout) || `git exited with ${String(result.exitCode)}`,
    remedy: "Nothing of yours was changed; the change is kept below",
  };
}

const REMEDY_TOO_LARGE =
  "Nothing was pushed. Remove the large file from the change (large binaries belong in Git LFS), then ask again";

const REMEDY_LOCAL_BASE =
  "Nothing was written. The repository's history changed under the run (its base commit is gone); run again";

const REMEDY_UNVERIFIED =
  "Nothing was pushed. The run's output is kept in the run log; " +
  "ask again, and if it repeats, tell the operator " +
  "(the sandbox's result did not match what the run committed)";

/** Where the sandbox writes its bundle: beside the checkout's files, never committed (the commit is made). */
export function resultBundlePath(runId: string): string {
  return `.harness-result-${runId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 40)}.bundle`;
}

/**
 * Inside the sandbox, where the agent already ran: bundle `HEAD` less the base. The harness's
 * own settings come first on the command line, so the checkout's hooks and fsmonitor stay off
 * even here; the bundle is a claim that the host checks, not a trusted artefact.
 */
async function exportBundle(request: DeliveryRequest, destination: string): Promise<void> {
  const path = resultBundlePath(request.runId);
  const result = await request.sandbox.exec({
    argv: [
      "git",
      ...SANDBOX_GIT_SAFETY,
      "-c",
      `core.bigFileThreshold=${STREAMING_THRESHOLD}`,
      "bundle",
      "create",
      "--quiet",
      path,
      "HEAD",
      `^${request.baseSha}`,
    ],
    cwd: request.sandbox.workDir,
    timeout: 300_000,
    ...(request.signal ? { signal: request.signal } : {}),
  });
  if (result.exitCode !== 0)
    throw new Error(`git bundle exited with ${String(result.exitCode)}: ${lastLine(result.stderr || result.stdout)}`);
  await request.sandbox.downloadToFile(path, destination, request.maxResultBytes ?? MAX_RESULT_BYTES);
}

/** The bundle's header when it holds the run's one result on its base, else what is wrong. */
async function checkHeader(bundlePath: string, request: DeliveryRequest): Promise<BundleHeader | string> {
  let header;
  try {
    header = await readBundleHeader(bundlePath);
  } catch (error) {
    return error instanceof BundleFormatError
      ? `it is not a readable git bundle (${error.message})`
      : describeError(error);
  }
  if (header.refs.length !== 1 || header.refs[0]?.name !== "HEAD") {
    return `it carries ${String(header.refs.length)} refs (${header.refs
      .slice(0, 3)
      .map((ref) => JSON.stringify(ref.name.slice(0, 80)))
      .join(", ")}), where the run's one result was expected`;
  }
  if (header.refs[0].sha !== request.commitSha) return "it holds a different commit from the one the run committed";
  const foreign = header.prerequisites.filter((sha) => sha !== request.baseSha);
  if (foreign.length > 0)
    return `it builds on ${String(foreign.length)} commit(s) other than the run's base ${request.baseSha.slice(0, 12)}`;
  return header;
}

async function checkAncestry(gitDir: string, request: DeliveryRequest): Promise<string | undefined> {
  const range = `${request.baseSha}..refs/harness/result`;
  const [all, descendants] = await Promise.all([
    hostGit(gitDir, ["rev-list", "--count", range]),
    hostGit(gitDir, ["rev-list", "--count", "--ancestry-path", range]),
  ]);
  const count = Number(all.stdout.trim());
  if (all.exitCode !== 0 || descendants.exitCode !== 0 || !Number.isInteger(count))
    return "its history could not be read";
  if (count === 0) return "it adds no commit on top of the base";
  if (count > MAX_RESULT_COMMITS)
    return `it adds ${String(count)} commits; at most ${String(MAX_RESULT_COMMITS)} are accepted`;
  if (Number(descendants.stdout.trim()) !== count)
    return `it carries commits that do not descend from the run's base ${request.baseSha.slice(0, 12)}`;
  return undefined;
}

/** The run's commit, written here: the verified result's tree on the base, by the harness. */
async function writeCommit(gitDir: string, request: DeliveryRequest): Promise<string> {
  const { name, email } = request.commit.identity;
  const date = `${String(Math.floor((request.commit.now ?? new Date()).getTime() / 1000))} +0000`;
  const identity = {
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_AUTHOR_DATE: date,
    GIT_COMMITTER_NAME: name,
    GIT_COMMITTER_EMAIL: email,
    GIT_COMMITTER_DATE: date,
  };
  const sha = await hostGitOrThrow(
    gitDir,
    "Writing the run's commit",
    ["commit-tree", "refs/harness/result^{tree}", "-p", request.baseSha, "-F", "-"],
    { env: identity, stdin: request.commit.message, timeout: 60_000 },
  );
  return sha.trim();
}

/** `options` carries the credential: the base's blobs of changed files are fetched on demand. */
async function formatPatch(
  gitDir: string,
  baseSha: string,
  commitSha: string,
  options: HostGitOptions,
): Promise<string> {
  const result = await hostGit(
    gitDir,
    ["format-patch", "--stdout", "--no-color", "--no-ext-diff", "--no-textconv", `${baseSha}..${commitSha}`],
    { ...options, maxOutput: MAX_SCANNED_DIFF_BYTES },
  );
  if (result.exitCode !== 0) return "";
  if (result.truncated) return `[patch not kept: larger than ${formatSize(MAX_SCANNED_DIFF_BYTES)}]\n`;
  return headOfPatch(result.stdout, MAX_PATCH_BYTES);
}

/** A patch is only useful from its start, so large ones keep their head, cut at a line. */
export function headOfPatch(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  const marker = `\n[… patch cut: ${String(bytes.length)} bytes in all …]\n`;
  const head = bytes.subarray(0, maxBytes - Buffer.byteLength(marker)).toString("utf8");
  return head.slice(0, Math.max(0, head.lastIndexOf("\n"))) + marker;
}

/** "a GitHub token in config/ci.env (line 3) and ANTHROPIC_API_KEY (base64-encoded) in the commit message" */
function describeFindings(findings: readonly SecretFinding[]): string {
  const shown = findings.slice(0, 3).map((finding) => {
    const where =
      finding.where === "commit message"
        ? "the commit message"
        : `${finding.file ?? "a file"}${finding.line !== undefined ? ` (line ${String(finding.line)})` : ""}`;
    return `${finding.kind} in ${where}`;
  });
  const more = findings.length > shown.length ? ` and ${String(findings.length - shown.length)} more` : "";
  return `${shown.join(", ")}${more}`;
}

/** A result too large to check, or one whose objects could not be read; `problem` may name the agent's files. */
function refusedAsLarge(check: { tooLarge: boolean; problem: string }, request: DeliveryRequest): DeliveryOutcome {
  const problem = request.redact(check.problem);
  return check.tooLarge
    ? refused("file_too_large", `the run's result is too large to check: ${problem}`, REMEDY_TOO_LARGE)
    : refused("unverified", `the run's result failed verification: ${problem}`, REMEDY_UNVERIFIED);
}

function refused(
  kind: PushErrorKind,
  error: string,
  remedy: string,
  extra: { diffstat?: string; patch?: string; findings?: SecretFinding[]; commitSha?: string } = {},
): DeliveryOutcome {
  return { delivered: false, kind, error, remedy, ...extra };
}

function lastLine(text: string): string {
  return text.trim().split("\n").slice(-1)[0]?.slice(0, 300) ?? "";
}
