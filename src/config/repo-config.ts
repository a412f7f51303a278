import { z } from "zod";
import { imagePatternProblem, imageReferenceProblem } from "../sandbox/docker/image-reference.js";
import { parseRepositoryAllowlist } from "../sandbox/egress/allowlist.js";
import { parseCommandLine } from "../util/command-line.js";
import { HarnessError } from "../util/errors.js";

/** Repository permission levels, weakest first, as GitHub's permission API reports them. */
export const PERMISSION_LEVELS = ["none", "read", "triage", "write", "maintain", "admin"] as const;
export type PermissionLevel = (typeof PERMISSION_LEVELS)[number];

/** Entries an organisation's list of allowed images may have. */
const MAX_ALLOWED_IMAGES = 100;

/** A command given as one string (`npm test`) or as an argv list (`[npm, test]`). */
const commandSchema = z.union([z.string().trim().min(1), z.array(z.string()).min(1)]);

/**
 * `.github/harness.yml`, read from the default branch (never from a PR branch or a fork, so a
 * contributor cannot loosen it), with organisation defaults from the org's `.github` repository.
 * Keys are snake_case as written in YAML; every key is optional.
 */
export const repoConfigSchema = z
  .object({
    /** The comment command that triggers a run. */
    command: z
      .string()
      .regex(/^\/[A-Za-z0-9_-]{1,30}$/, "must be a slash followed by letters, digits, '-' or '_' (e.g. /harness)")
      .default("/harness"),
    /** The label that triggers a run on an issue (intent = title + body). */
    label: z.string().trim().min(1).max(50).default("harness"),
    /** The least repository permission a requester needs. */
    permission: z.enum(["read", "triage", "write", "maintain", "admin"]).default("write"),
    /** Bot logins (e.g. `renovate[bot]`) allowed to trigger runs; bots are ignored otherwise. */
    allowed_bots: z.array(z.string().trim().min(1)).default([]),
    agent: z.enum(["claude-code", "codex", "pi", "command"]).default("claude-code"),
    /** For `agent: command`: the program (argv list) run in the clone with the prompt in HARNESS_PROMPT. */
    agent_command: z.array(z.string()).min(1).optional(),
    /** `default`, `command`, or the path of a YAML blueprint in this repository. */
    blueprint: z.string().trim().min(1).default("default"),
    setup: commandSchema.optional(),
    /**
     * Setup secrets the `setup` command receives as environment variables (e.g. NPM_TOKEN for a
     * private registry). Each must be declared for this repository by the operator; agents never
     * receive them.
     */
    setup_secrets: z
      .array(
        z.string().regex(/^[A-Z_][A-Z0-9_]{0,63}$/, "must be environment variable names in capitals (e.g. NPM_TOKEN)"),
      )
      .max(20)
      .default([]),
    verify: commandSchema.optional(),
    /** For `blueprint: command`: the one command to run. */
    run: commandSchema.optional(),
    /** Fix-agent rounds after a failed verify. */
    fix_attempts: z.number().int().min(0).max(10).default(2),
    timeout_minutes: z.number().positive().max(360).default(60),
    /** Cap on the agent's turns, for agents that support one. */
    max_turns: z.number().int().positive().max(1000).optional(),
    model: z.string().trim().min(1).optional(),
    /**
     * What a run's agents may spend: the agent step that reaches `max_cost_usd` (US dollars, the
     * whole run's spend) is stopped. Within the operator's ceiling (HARNESS_MAX_COST_USD).
     * `daily_usd` caps the repository's agent spend per UTC day: a run asked for once it is
     * reached is refused, and one that starts gets at most what is left of it.
     */
    budget: z
      .object({
        max_cost_usd: z.number().positive().max(100_000).optional(),
        daily_usd: z.number().positive().max(1_000_000).optional(),
      })
      .strict()
      .optional(),
    sandbox: z
      .object({
        provider: z.enum(["local", "daytona", "docker"]).optional(),
        snapshot: z.string().trim().min(1).optional(),
        /** On Docker: the image the run's container starts from (default the operator's HARNESS_DOCKER_IMAGE). */
        image: z.string().trim().min(1).superRefine(imageReferenceIssue(imageReferenceProblem)).optional(),
        /**
         * The organisation's file only: the images its repositories may choose with `image`, each a
         * reference or the start of one followed by `*` (`ghcr.io/acme/*`).
         */
        images: z
          .array(z.string().trim().min(1).superRefine(imageReferenceIssue(imagePatternProblem)))
          .min(1)
          .max(MAX_ALLOWED_IMAGES)
          .optional(),
        /**
         * `shallow` (Daytona's default: the latest commit only) or `full`, for steps that read the
         * repository's history (`git log`, `git blame`, bisecting). The local sandbox always has it all.
         */
        history: z.enum(["shallow", "full"]).optional(),
        /** `open`, `allowlist` (only `allow` and the agent's model API) or `none`, within the operator's ceiling. */
        network: z.enum(["open", "allowlist", "none"]).optional(),
        /**
         * Domains (`registry.npmjs.org`, `*.pythonhosted.org`) and CIDRs reachable in `allowlist` mode;
         * no CIDR may overlap an internal range (only HARNESS_NETWORK_ALLOW opens those).
         */
        allow: z.array(z.string().trim().min(1).max(253)).max(256).optional(),
        resources: z
          .object({
            cpu: z.number().positive().optional(),
            memory: z.number().positive().optional(),
            disk: z.number().positive().optional(),
          })
          .strict()
          .optional(),
      })
      .strict()
      .default({}),
    pr: z
      .object({
        /** Open pull requests as drafts: an agent's change deserves a human look before review requests go out. */
        draft: z.boolean().default(true),
        labels: z.array(z.string().trim().min(1)).default([]),
        reviewers: z.array(z.string().trim().min(1)).default([]),
      })
      .strict()
      .default({ draft: true, labels: [], reviewers: [] }),
    /** Let runs change `.github/workflows/` (the app then also needs the Workflows permission). */
    allow_workflow_changes: z.boolean().default(false),
    /**
     * Reviews on Harness's pull requests bring follow-up commits: `false` turns that off, or an
     * object says on which pull requests and what to do with a review from below `permission`.
     */
    reviews: z.preprocess(
      (value) => (typeof value === "boolean" ? { enabled: value } : value),
      z
        .object({
          enabled: z.boolean().default(true),
          /** `harness`: only pull requests Harness opened; `all`: any pull request from this repository. */
          pull_requests: z.enum(["harness", "all"]).default("harness"),
          /**
           * A review from below `permission`: `approval` (held until a maintainer approves exactly its
           * text, then addressed fenced as untrusted), `untrusted` (addressed at once, fenced) or `refuse`.
           */
          below_bar: z.enum(["approval", "untrusted", "refuse"]).default("approval"),
        })
        .strict()
        .default({ enabled: true, pull_requests: "harness", below_bar: "approval" }),
    ),
    /**
     * After Harness pushes it watches the commit's checks: `false` turns that off; otherwise how
     * many fix rounds a failing CI gets, whether a flaky failure is re-run once first, and how
     * long to wait for the checks.
     */
    ci: z.preprocess(
      (value) => (typeof value === "boolean" ? { enabled: value } : value),
      z
        .object({
          enabled: z.boolean().default(true),
          fix_attempts: z.number().int().min(0).max(10).default(2),
          rerun_flaky: z.boolean().default(true),
          timeout_minutes: z
            .number()
            .positive()
            .max(24 * 60)
            .default(60),
        })
        .strict()
        .default({ enabled: true, fix_attempts: 2, rerun_flaky: true, timeout_minutes: 60 }),
    ),
    /**
     * Automatic rounds (review follow-ups and CI fixes) one pull request may take in all; past it
     * Harness says so and waits for a `/harness …` command.
     */
    max_rounds: z.number().int().min(0).max(50).default(5),
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.agent === "command" && !config.agent_command) {
      ctx.addIssue({ code: "custom", path: ["agent_command"], message: "is required when agent is command" });
    }
    if (config.sandbox.allow && config.sandbox.network !== "allowlist") {
      ctx.addIssue({
        code: "custom",
        path: ["sandbox", "allow"],
        message: "only applies with `sandbox.network: allowlist`",
      });
    }
    if (config.sandbox.allow) {
      try {
        // A CIDR that reaches loopback, private or metadata addresses is the operator's to allow.
        parseRepositoryAllowlist(config.sandbox.allow);
      } catch (error) {
        ctx.addIssue({
          code: "custom",
          path: ["sandbox", "allow"],
          message: error instanceof Error ? error.message : String(error),
        });
      }
    }
    if (config.setup_secrets.length > 0 && !config.setup) {
      ctx.addIssue({ code: "custom", path: ["setup_secrets"], message: "needs a `setup` command to give them to" });
    }
    if (config.blueprint === "command" && !config.run) {
      ctx.addIssue({ code: "custom", path: ["run"], message: "is required when blueprint is command" });
    }
  });

export type RepoConfig = z.output<typeof repoConfigSchema>;

/** A refinement that reports `problem`'s sentence for a value it finds wrong. */
function imageReferenceIssue(problem: (text: string) => string | undefined) {
  return (value: string, ctx: z.RefinementCtx): void => {
    const found = problem(value);
    if (found !== undefined) ctx.addIssue({ code: "custom", message: found });
  };
}

/** Problems beyond these are counted, not listed: the message goes into an issue comment. */
const MAX_PROBLEMS = 20;

/** An invalid `.github/harness.yml`; the message names each key and the reason. */
export class RepoConfigError extends HarnessError {
  readonly problems: string[];

  constructor(problems: string[]) {
    const listed =
      problems.length > MAX_PROBLEMS
        ? [...problems.slice(0, MAX_PROBLEMS), `and ${String(problems.length - MAX_PROBLEMS)} more problems`]
        : problems;
    super("invalid_config", `.github/harness.yml is invalid: ${listed.join("; ")}`);
    this.problems = listed;
  }
}

/** Validates the merged config (`null` = no file anywhere: all defaults). */
export function parseRepoConfig(raw: unknown): RepoConfig {
  const parsed = repoConfigSchema.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  throw new RepoConfigError(
    parsed.error.issues.map((issue) => {
      const key = issue.path.map(String).join(".") || "(top level)";
      const message =
        issue.code === "unrecognized_keys"
          ? `unknown key${issue.keys.length > 1 ? "s" : ""} ${unknownKeys(issue.keys)}`
          : issue.message;
      return `\`${key}\` ${message}`;
    }),
  );
}

/** Unknown keys as written, a few and each cut short: a stranger's file could hold thousands of long ones. */
function unknownKeys(keys: string[]): string {
  const shown = keys.slice(0, 5).map((key) => (key.length > 60 ? `${key.slice(0, 60)}…` : key));
  return keys.length > 5 ? `${shown.join(", ")} and ${String(keys.length - 5)} more` : shown.join(", ");
}

/** A config command as an argv (`"npm test"` → `["npm", "test"]`). */
export function commandArgv(command: string | string[] | undefined, what: string): string[] | undefined {
  if (command === undefined) return undefined;
  return Array.isArray(command) ? command : parseCommandLine(command, `${what} in .github/harness.yml`);
}

/**
 * A person's level from GitHub's collaborator-permission answer: the role, which also carries
 * maintain and triage, when it is a level; else the base permission (a custom role's name is not
 * a level); `none` for no collaborator.
 */
export function permissionLevelOf(access: { permission?: string; roleName?: string } | undefined): PermissionLevel {
  const known = (level: string | undefined): level is PermissionLevel =>
    level !== undefined && (PERMISSION_LEVELS as readonly string[]).includes(level);
  if (known(access?.roleName)) return access.roleName;
  return known(access?.permission) ? access.permission : "none";
}

/** True when `actual` reaches `minimum` on GitHub's permission ladder. */
export function meetsPermission(actual: string | undefined, minimum: PermissionLevel): boolean {
  const rank = (level: string | undefined): number => PERMISSION_LEVELS.indexOf((level ?? "none") as PermissionLevel);
  const actualRank = rank(actual);
  return actualRank >= 0 && actualRank >= rank(minimum);
}
