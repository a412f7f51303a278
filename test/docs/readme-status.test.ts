import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { parse } from "yaml";

/*
 * The README's Status says what is shipped and what is not yet. Each capability below is shipped:
 * the code that does it is named, and the Status must name it among what works, never among
 * what is to come. When a capability ships, add it here and move it up in the README.
 */

const ROOT = join(import.meta.dirname, "..", "..");

type Evidence =
  | { file: string; contains: string }
  /** The App manifest subscribes to this webhook event. */
  | { appEvent: string }
  /** The App manifest asks for this permission (at least read). */
  | { appPermission: string };

interface ShippedCapability {
  name: string;
  /** How the README's Status names it. */
  named: RegExp;
  evidence: Evidence[];
}

const SHIPPED: ShippedCapability[] = [
  {
    name: "follow-up commits from reviews",
    named: /\bfollow-ups?\b/i,
    evidence: [
      { file: "src/runs/worker/review-round.ts", contains: "export async function prepareReviewRound" },
      { appEvent: "pull_request_review" },
      { appEvent: "pull_request_review_comment" },
    ],
  },
  {
    name: "fix rounds for failing CI",
    named: /\bfailing CI\b/i,
    evidence: [
      { file: "src/runs/worker/ci-round.ts", contains: "export async function prepareCiRound" },
      { appEvent: "check_run" },
      { appPermission: "checks" },
    ],
  },
  {
    name: "pull request outcomes",
    named: /\boutcomes\b/i,
    evidence: [{ file: "src/pulls/outcome.ts", contains: "export function pullOutcome" }, { appEvent: "pull_request" }],
  },
  {
    name: "the model gateway",
    named: /\bmodel gateway\b/i,
    evidence: [{ file: "src/gateway/model-gateway.ts", contains: "export class ModelGateway" }],
  },
  {
    name: "the Daytona sandbox",
    named: /\bDaytona\b/,
    evidence: [{ file: "src/sandbox/daytona/sandbox.ts", contains: "export async function createDaytonaSandbox" }],
  },
  {
    name: "a Docker image per repository",
    named: /\bimage of its choosing\b/i,
    evidence: [
      { file: "src/sandbox/docker/image-reference.ts", contains: "export function imageAllowed" },
      { file: "src/sandbox/docker/image-pull.ts", contains: "export async function createContainerPulling" },
    ],
  },
  {
    name: "an isolated run of a repository on this machine",
    named: /clones\s+a repository on this machine/i,
    evidence: [{ file: "src/harness/local-delivery.ts", contains: "export async function deliverToLocalRepository" }],
  },
  {
    name: "the local sandbox isolated with bubblewrap",
    named: /\bbubblewrap\b/i,
    evidence: [{ file: "src/sandbox/local/isolation.ts", contains: "bwrap" }],
  },
  {
    name: "an unprivileged sandbox user under seccomp when root",
    named: /\bseccomp\b/i,
    evidence: [
      { file: "src/sandbox/local/seccomp.ts", contains: "export const REFUSED_SYSCALLS" },
      { file: "src/sandbox/local/sandbox-user.ts", contains: "export const SANDBOX_USER_NAME" },
    ],
  },
  {
    name: "durable runs on SQLite",
    named: /\bSQLite\b/,
    evidence: [{ file: "src/runs/queue/sqlite.ts", contains: "export class SqliteRunQueue" }],
  },
  {
    name: "scale-out on BullMQ and Redis",
    named: /\bBullMQ\b/,
    evidence: [{ file: "src/runs/queue/bullmq.ts", contains: "export class BullmqRunQueue" }],
  },
  {
    name: "rate limits shared by the fleet",
    named: /\bGitHub rate limit shared\b/i,
    evidence: [{ file: "src/github/rate-limit-gate.ts", contains: "export function createRateLimitGate" }],
  },
  {
    name: "Kubernetes manifests",
    named: /\bKubernetes manifests\b/,
    evidence: [{ file: "deploy/kubernetes/kustomization.yaml", contains: "kind: Kustomization" }],
  },
  {
    name: "the chaos soak",
    named: /\bchaos soak\b/i,
    evidence: [{ file: "test/soak/driver.ts", contains: "export async function runSoak" }],
  },
  {
    name: "the orphan reaper",
    named: /\borphan reaper\b/i,
    evidence: [{ file: "src/runs/reaper.ts", contains: "export class OrphanReaper" }],
  },
  {
    name: "run pages",
    named: /\brun pages\b/i,
    evidence: [
      { file: "src/web/run-pages.ts", contains: "export function createRunPages" },
      { file: "src/web/auth/github-auth.ts", contains: "export function createGitHubAuth" },
    ],
  },
  {
    name: "metrics",
    named: /\bmetrics\b/i,
    evidence: [{ file: "src/metrics/metrics-endpoint.ts", contains: "export function metricsEndpoint" }],
  },
  {
    name: "the write path outside the sandbox",
    named: /\bwrite path\b/i,
    evidence: [{ file: "src/delivery/deliver.ts", contains: "export async function deliverRun" }],
  },
  {
    name: "egress policy",
    named: /\begress\b/i,
    evidence: [{ file: "src/sandbox/egress/proxy.ts", contains: "export async function startEgressProxy" }],
  },
  {
    name: "approvals",
    named: /\bapprovals\b/i,
    evidence: [{ file: "src/runs/pending/port.ts", contains: "export interface PendingRequest" }],
  },
  {
    name: "organisation policy",
    named: /\borganisation policy\b/i,
    evidence: [{ file: "src/config/org-floor.ts", contains: "export function resolveRepoConfig" }],
  },
  {
    name: "quotas",
    named: /\bquotas\b/i,
    evidence: [{ file: "src/runs/queue/quota.ts", contains: "export function refusalFor" }],
  },
  {
    name: "the audit trail",
    named: /\baudit trail\b/i,
    evidence: [{ file: "src/audit/audit-log.ts", contains: "export interface AuditLog" }],
  },
  {
    name: "named sandboxes driven from the CLI",
    named: /\bharness sandboxes\b/,
    evidence: [{ file: "src/cli/sandboxes.ts", contains: "export function registerSandboxesCommand" }],
  },
  {
    name: "the MCP server",
    named: /\bMCP server\b/,
    evidence: [{ file: "src/mcp/sandbox-server.ts", contains: "export function createSandboxMcpServer" }],
  },
  {
    name: "agent sessions continued",
    named: /\bsession is kept and continued\b/i,
    evidence: [{ file: "src/harness/session-resume.ts", contains: "export function planResume" }],
  },
  {
    name: "budgets that pause",
    named: /\bpaused at its money\s+budget\b/i,
    evidence: [{ file: "src/runs/worker/budget-pause.ts", contains: "export async function keepPausedRun" }],
  },
  {
    name: "Redis Cluster and Sentinel",
    named: /\bRedis\s+Cluster\b[^]*\bSentinel\b/,
    evidence: [
      { file: "src/store/redis-settings.ts", contains: "REDIS_CLUSTER_NODES" },
      { file: "src/store/redis-connection.ts", contains: "new Cluster(" },
      { file: "src/store/redis-keys.ts", contains: "export function storeNamespace" },
    ],
  },
];

/** Where the Status stops listing what works: its "Not yet." part, or any word of things to come. */
const FUTURE = /\*\*Not yet\.\*\*|\bnot yet\b|\bnext\b|\bplanned\b|\bcoming\b|\broadmap\b/i;

/**
 * The Status blockquote as one line of prose, split at the start of the first sentence that
 * turns to the future ("Follow-ups are the next pieces" is all future, its subject included).
 */
function statusParts(readme: string): { shipped: string; future: string } | undefined {
  const lines = readme.split("\n");
  const start = lines.findIndex((line) => line.startsWith("> **Status.**"));
  if (start === -1) return undefined;
  const quote: string[] = [];
  for (const line of lines.slice(start)) {
    if (!line.startsWith(">")) break;
    quote.push(line.replace(/^>\s?/, ""));
  }
  const text = quote.join(" ").replace(/\s+/g, " ");
  const marker = FUTURE.exec(text)?.index;
  const at = marker === undefined ? text.length : text.lastIndexOf(". ", marker) + 1;
  return { shipped: text.slice(0, at), future: text.slice(at).trimStart() };
}

/** What is wrong with the Status: a shipped capability missing from what works, or named as to come. */
function statusProblems(readme: string, capabilities: readonly ShippedCapability[]): string[] {
  const parts = statusParts(readme);
  if (!parts) return ["the README has no `> **Status.**` paragraph"];
  const problems: string[] = [];
  for (const capability of capabilities) {
    if (!capability.named.test(parts.shipped)) problems.push(`${capability.name} is not among what works`);
    if (capability.named.test(parts.future)) problems.push(`${capability.name} is shipped but named as to come`);
  }
  return problems;
}

interface AppManifest {
  default_events?: string[];
  default_permissions?: Record<string, string>;
}

function missingEvidence(evidence: Evidence, manifest: AppManifest): string | undefined {
  if ("file" in evidence) {
    const path = join(ROOT, evidence.file);
    if (!existsSync(path)) return `${evidence.file} does not exist`;
    return readFileSync(path, "utf8").includes(evidence.contains)
      ? undefined
      : `${evidence.file} has no \`${evidence.contains}\``;
  }
  if ("appEvent" in evidence) {
    const subscribed = manifest.default_events?.includes(evidence.appEvent) ?? false;
    return subscribed ? undefined : `app.yml has no ${evidence.appEvent} event`;
  }
  const level = manifest.default_permissions?.[evidence.appPermission];
  return level === "read" || level === "write" ? undefined : `app.yml does not ask for ${evidence.appPermission}`;
}

const readme = readFileSync(join(ROOT, "README.md"), "utf8");

describe("the README's Status", () => {
  test("every capability listed as shipped is in the code", () => {
    const manifest = parse(readFileSync(join(ROOT, "app.yml"), "utf8")) as AppManifest;
    const missing = SHIPPED.flatMap((capability) =>
      capability.evidence
        .map((evidence) => missingEvidence(evidence, manifest))
        .filter((problem) => problem !== undefined)
        .map((problem) => `${capability.name}: ${problem}`),
    );
    expect(missing).toEqual([]);
  });

  test("names every shipped capability among what works, and none among what is to come", () => {
    expect(statusProblems(readme, SHIPPED)).toEqual([]);
    // What is to come has its own part, so a reader (and the split above) can tell it apart.
    expect(statusParts(readme)?.future).toMatch(/^\*\*Not yet\.\*\*/);
  });

  test("a shipped capability called the next piece, or left out of what works, is caught", () => {
    const followUps = SHIPPED.filter((capability) => /reviews|failing CI/.test(capability.name));
    const asNext = [
      "> **Status.** The GitHub App works end to end.",
      ">",
      "> **Not yet.** Follow-up commits from reviews and failing CI are the next pieces.",
    ].join("\n");
    expect(statusProblems(asNext, followUps)).toEqual([
      "follow-up commits from reviews is not among what works",
      "follow-up commits from reviews is shipped but named as to come",
      "fix rounds for failing CI is not among what works",
      "fix rounds for failing CI is shipped but named as to come",
    ]);
    const nextWithoutTheMarker =
      "> **Status.** The GitHub App works end to end. Follow-up commits from PR reviews are the next pieces.";
    expect(statusProblems(nextWithoutTheMarker, followUps.slice(0, 1))).toEqual([
      "follow-up commits from reviews is not among what works",
      "follow-up commits from reviews is shipped but named as to come",
    ]);
  });
});
