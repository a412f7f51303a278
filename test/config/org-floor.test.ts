import { describe, expect, test } from "vitest";
import { FLOOR_RULES, mergeRawConfigs, orgMaxCostUsd, resolveRepoConfig } from "../../src/config/org-floor.js";
import { parseRepoConfig, repoConfigSchema, RepoConfigError } from "../../src/config/repo-config.js";

const ORG = "acme/.github";

/** The problems a resolution fails with; fails the test when it succeeds. */
function problemsOf(org: unknown, repo: unknown): string[] {
  try {
    resolveRepoConfig({ org, repo }, ORG);
  } catch (error) {
    if (error instanceof RepoConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected the configuration to be refused");
}

describe("merging the organisation's file with the repository's", () => {
  test("no files at all gives the defaults", () => {
    expect(resolveRepoConfig({}, ORG)).toEqual(parseRepoConfig({}));
    expect(resolveRepoConfig({ org: null, repo: null }, ORG)).toEqual(parseRepoConfig({}));
  });

  test("the repository's keys win one by one; sandbox, sandbox.resources and pr merge per key", () => {
    const org = {
      command: "/org-bot",
      verify: "make check",
      pr: { labels: ["harness"], reviewers: ["acme/leads"] },
      sandbox: { provider: "daytona", resources: { cpu: 4, memory: 8 } },
    };
    const repo = { verify: "npm test", pr: { draft: false }, sandbox: { resources: { cpu: 2 } } };
    const config = resolveRepoConfig({ org, repo }, ORG);
    expect(config.command).toBe("/org-bot");
    expect(config.verify).toBe("npm test");
    expect(config.pr).toEqual({ draft: false, labels: ["harness"], reviewers: ["acme/leads"] });
    expect(config.sandbox).toEqual({ provider: "daytona", resources: { cpu: 2, memory: 8 } });
  });

  test("lists are replaced, not concatenated", () => {
    expect(mergeRawConfigs({ pr: { labels: ["a", "b"] } }, { pr: { labels: ["c"] } })).toEqual({
      pr: { labels: ["c"] },
    });
  });

  test("an inherited allow list is dropped when the repository picks a stricter network mode", () => {
    const org = { sandbox: { network: "allowlist", allow: ["registry.npmjs.org"] } };
    expect(resolveRepoConfig({ org, repo: { sandbox: { network: "none" } } }, ORG).sandbox).toEqual({
      network: "none",
    });
    expect(resolveRepoConfig({ org, repo: {} }, ORG).sandbox).toEqual({
      network: "allowlist",
      allow: ["registry.npmjs.org"],
    });
  });

  test("a `__proto__` key stays a key and is refused, never a prototype", () => {
    const repo = JSON.parse('{"__proto__": {"permission": "read"}}') as unknown;
    const merged = mergeRawConfigs({}, repo as Record<string, unknown>);
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(problemsOf({ permission: "admin" }, repo).join("\n")).toMatch(/unknown key __proto__/);
  });
});

describe("the organisation's values are a floor", () => {
  test("permission: inherited when the repository says nothing, raised freely, never lowered", () => {
    expect(resolveRepoConfig({ org: { permission: "admin" }, repo: { verify: "npm test" } }, ORG).permission).toBe(
      "admin",
    );
    expect(resolveRepoConfig({ org: { permission: "write" }, repo: { permission: "maintain" } }, ORG).permission).toBe(
      "maintain",
    );
    expect(problemsOf({ permission: "admin" }, { permission: "write" })).toEqual([
      "`permission: write` is below the organisation's `permission: admin` (acme/.github); " +
        "a repository may raise the bar, not lower it",
    ]);
  });

  test(
    "allowed_bots: the repository's list must be a subset of the organisation's " +
      "(logins compared case-insensitively)",
    () => {
      const org = { allowed_bots: ["renovate[bot]", "dependabot[bot]"] };
      expect(resolveRepoConfig({ org, repo: { allowed_bots: ["Renovate[bot]"] } }, ORG).allowed_bots).toEqual([
        "Renovate[bot]",
      ]);
      expect(problemsOf(org, { allowed_bots: ["renovate[bot]", "mallory[bot]"] })).toEqual([
        expect.stringMatching(
          new RegExp(
            "^`allowed_bots` adds `mallory\\[bot\\]`, which the organisation's " +
              "`allowed_bots: \\[renovate\\[bot\\], dependabot\\[bot\\]\\]` \\(acme\\/\\.github\\) does not allow$",
          ),
        ),
      ]);
    },
  );

  test("sandbox.provider and sandbox.snapshot cannot be changed", () => {
    const org = { sandbox: { provider: "daytona", snapshot: "acme-node-22" } };
    expect(resolveRepoConfig({ org, repo: { sandbox: { provider: "daytona" } } }, ORG).sandbox.snapshot).toBe(
      "acme-node-22",
    );
    expect(problemsOf(org, { sandbox: { provider: "local", snapshot: "my-own" } })).toEqual([
      "`sandbox.provider: local` differs from the organisation's `sandbox.provider: daytona` (acme/.github); " +
        "only the organisation may change it",
      "`sandbox.snapshot: my-own` differs from the organisation's `sandbox.snapshot: acme-node-22` " +
        "(acme/.github); only the organisation may change it",
    ]);
  });

  test("sandbox.images: a repository's sandbox.image outside the organisation's list is refused, naming it", () => {
    const org = { sandbox: { provider: "docker", images: ["ghcr.io/acme/*", "node:22"] } };
    expect(resolveRepoConfig({ org, repo: { sandbox: { image: "ghcr.io/acme/runner:1.4" } } }, ORG).sandbox.image).toBe(
      "ghcr.io/acme/runner:1.4",
    );
    // The same image written in full is the same image.
    expect(
      resolveRepoConfig({ org, repo: { sandbox: { image: "docker.io/library/node:22" } } }, ORG).sandbox.image,
    ).toBe("docker.io/library/node:22");
    // Saying nothing leaves the operator's image: the list bounds what repositories choose.
    expect(resolveRepoConfig({ org, repo: {} }, ORG).sandbox.image).toBeUndefined();
    expect(problemsOf(org, { sandbox: { image: "ghcr.io/acme-evil/miner:1" } })).toEqual([
      "`sandbox.image: ghcr.io/acme-evil/miner:1` is not one the organisation allows: its `sandbox.images` " +
        "(acme/.github) admits only `ghcr.io/acme/*`, `node:22`; choose one of those for `sandbox.image`, " +
        "or ask the organisation to add yours to `sandbox.images`",
    ]);
  });

  test("sandbox.images is the organisation's alone: a repository may neither widen nor write it", () => {
    const org = { sandbox: { images: ["ghcr.io/acme/*"] } };
    expect(problemsOf(org, { sandbox: { images: ["*"], image: "evil/miner" } })).toEqual([
      "`sandbox.image: evil/miner` is not one the organisation allows: its `sandbox.images` (acme/.github) " +
        "admits only `ghcr.io/acme/*`; choose one of those for `sandbox.image`, " +
        "or ask the organisation to add yours to `sandbox.images`",
      "`sandbox.images` is the organisation's to set, in its `.github` repository (acme/.github), " +
        "not a repository's: remove it from .github/harness.yml",
    ]);
    expect(problemsOf({}, { sandbox: { images: ["ghcr.io/acme/*"] } })).toEqual([
      "`sandbox.images` is the organisation's to set, in its `.github` repository (acme/.github), " +
        "not a repository's: remove it from .github/harness.yml",
    ]);
    // The organisation's own `.github` repository reads the same file twice: that is no breach.
    expect(resolveRepoConfig({ org, repo: org }, ORG).sandbox.images).toEqual(["ghcr.io/acme/*"]);
  });

  test("sandbox.image: the organisation's is fixed without a list, and must be on its own list with one", () => {
    expect(problemsOf({ sandbox: { image: "ghcr.io/acme/runner:1" } }, { sandbox: { image: "node:22" } })).toEqual([
      "`sandbox.image: node:22` differs from the organisation's `sandbox.image: ghcr.io/acme/runner:1` " +
        "(acme/.github); only the organisation may change it",
    ]);
    const listed = { sandbox: { image: "ghcr.io/acme/runner:1", images: ["ghcr.io/acme/*", "node:22"] } };
    expect(resolveRepoConfig({ org: listed, repo: {} }, ORG).sandbox.image).toBe("ghcr.io/acme/runner:1");
    expect(resolveRepoConfig({ org: listed, repo: { sandbox: { image: "node:22" } } }, ORG).sandbox.image).toBe(
      "node:22",
    );
    expect(problemsOf({ sandbox: { image: "node:22", images: ["ghcr.io/acme/*"] } }, {})).toEqual([
      "acme/.github (the organisation's `.github` repository): `sandbox.image: node:22` is not among its own " +
        "`sandbox.images: [ghcr.io/acme/*]`; add it there or choose one of those",
    ]);
  });

  test("resources, timeout_minutes, fix_attempts and max_turns are ceilings", () => {
    const org = {
      sandbox: { resources: { cpu: 4, memory: 8, disk: 20 } },
      timeout_minutes: 30,
      fix_attempts: 2,
      max_turns: 50,
    };
    expect(
      resolveRepoConfig(
        { org, repo: { sandbox: { resources: { cpu: 2 } }, timeout_minutes: 10, fix_attempts: 0 } },
        ORG,
      ),
    ).toMatchObject({
      sandbox: { resources: { cpu: 2, memory: 8, disk: 20 } },
      timeout_minutes: 10,
      fix_attempts: 0,
      max_turns: 50,
    });
    const problems = problemsOf(org, {
      sandbox: { resources: { cpu: 8, memory: 8, disk: 40 } },
      timeout_minutes: 120,
      fix_attempts: 5,
      max_turns: 51,
    });
    expect(problems).toEqual([
      "`sandbox.resources.cpu: 8` exceeds the organisation's `sandbox.resources.cpu: 4` (acme/.github), a ceiling",
      "`sandbox.resources.disk: 40` exceeds the organisation's `sandbox.resources.disk: 20` (acme/.github), a ceiling",
      "`timeout_minutes: 120` exceeds the organisation's `timeout_minutes: 30` (acme/.github), a ceiling",
      "`fix_attempts: 5` exceeds the organisation's `fix_attempts: 2` (acme/.github), a ceiling",
      "`max_turns: 51` exceeds the organisation's `max_turns: 50` (acme/.github), a ceiling",
    ]);
  });

  test("only keys the organisation wrote bind: its defaults for the rest do not", () => {
    // The organisation's file leaves fix_attempts and timeout_minutes at their defaults (2, 60).
    const config = resolveRepoConfig(
      {
        org: { permission: "maintain" },
        repo: { fix_attempts: 5, timeout_minutes: 120, allow_workflow_changes: true },
      },
      ORG,
    );
    expect(config).toMatchObject({
      permission: "maintain",
      fix_attempts: 5,
      timeout_minutes: 120,
      allow_workflow_changes: true,
    });
  });

  test.each([
    ["none", "allowlist", true],
    ["none", "open", true],
    ["allowlist", "open", true],
    ["allowlist", "allowlist", false],
    ["allowlist", "none", false],
    ["open", "none", false],
  ] as const)("sandbox.network: organisation %s, repository %s → refused: %s", (orgNetwork, repoNetwork, refused) => {
    const org = { sandbox: { network: orgNetwork } };
    const repo = { sandbox: { network: repoNetwork } };
    if (refused) {
      expect(problemsOf(org, repo)).toEqual([
        `\`sandbox.network: ${repoNetwork}\` is more open than the organisation's ` +
          `\`sandbox.network: ${orgNetwork}\` (acme/.github); ` +
          `a repository may only be as strict or stricter (none > allowlist > open)`,
      ]);
    } else {
      expect(resolveRepoConfig({ org, repo }, ORG).sandbox.network).toBe(repoNetwork);
    }
  });

  test(
    "sandbox.allow: within an organisation's allow list, entries must be ones it lists " + "(case-insensitive, exact)",
    () => {
      const org = { sandbox: { network: "allowlist", allow: ["registry.npmjs.org", "*.pythonhosted.org"] } };
      expect(
        resolveRepoConfig({ org, repo: { sandbox: { allow: ["Registry.NPMjs.org"] } } }, ORG).sandbox.allow,
      ).toEqual(["Registry.NPMjs.org"]);
      expect(
        problemsOf(org, { sandbox: { allow: ["registry.npmjs.org", "files.pythonhosted.org", "evil.example"] } }),
      ).toEqual([
        "`sandbox.allow` adds `files.pythonhosted.org`, `evil.example`, " +
          "which the organisation's `sandbox.allow: [registry.npmjs.org, *.pythonhosted.org]` (acme/.github) " +
          "does not list",
      ]);
      // An organisation that sets allowlist mode without listing domains leaves the list to repositories.
      expect(
        resolveRepoConfig(
          { org: { sandbox: { network: "allowlist" } }, repo: { sandbox: { allow: ["example.org"] } } },
          ORG,
        ).sandbox.allow,
      ).toEqual(["example.org"]);
    },
  );

  test("allow_workflow_changes: an organisation's false cannot be turned true", () => {
    expect(problemsOf({ allow_workflow_changes: false }, { allow_workflow_changes: true })).toEqual([
      "`allow_workflow_changes: true` is not allowed: " +
        "the organisation's `allow_workflow_changes: false` (acme/.github)",
    ]);
    expect(
      resolveRepoConfig({ org: { allow_workflow_changes: true }, repo: { allow_workflow_changes: false } }, ORG)
        .allow_workflow_changes,
    ).toBe(false);
  });

  test(
    "every breach is reported at once, each naming the key, the repository's value " + "and the organisation's limit",
    () => {
      const problems = problemsOf(
        { permission: "admin", timeout_minutes: 30, allow_workflow_changes: false },
        { permission: "read", timeout_minutes: 45, allow_workflow_changes: true },
      );
      expect(problems).toHaveLength(3);
      expect(problems.join("\n")).toMatch(/`permission: read`.*`permission: admin`/);
      expect(problems.join("\n")).toMatch(/`timeout_minutes: 45`.*`timeout_minutes: 30`/);
    },
  );

  test("long values from a file are cut short in messages", () => {
    const snapshot = "s".repeat(5000);
    const [problem] = problemsOf({ sandbox: { snapshot: "acme" } }, { sandbox: { snapshot } });
    expect(problem?.length).toBeLessThan(400);
  });
});

describe("problems in either file", () => {
  test("the organisation's file is validated on its own and its problems say where it lives", () => {
    expect(problemsOf({ timeout_minutes: 9999, colour: "blue" }, {})).toEqual([
      expect.stringMatching(/^acme\/\.github \(the organisation's `\.github` repository\): `timeout_minutes` /),
      "acme/.github (the organisation's `.github` repository): `(top level)` unknown key colour",
    ]);
  });

  test("the repository's problems are reported as its own", () => {
    expect(problemsOf({ permission: "admin" }, { agent: "gpt-9000" })).toEqual([expect.stringMatching(/^`agent` /)]);
  });

  test("a file that is not a map of keys is refused, naming which file", () => {
    expect(problemsOf(["permission", "admin"], {})).toEqual([
      "acme/.github (the organisation's `.github` repository): `(top level)` must be a map of keys (e.g. " +
        "`permission: write`), not a list",
    ]);
    expect(problemsOf({}, "permission admin")).toEqual([
      "`(top level)` must be a map of keys (e.g. `permission: write`), not a string",
    ]);
  });

  test("`_extends` is refused with the reason: Harness merges the organisation's file by itself", () => {
    expect(problemsOf({}, { _extends: ".github", verify: "npm test" })).toEqual([
      "`_extends` is not supported: Harness merges the organisation's defaults from `.github/harness.yml` in " +
        "acme/.github by itself; remove `_extends`",
    ]);
  });

  test("thousands of bad values make a bounded message: twenty problems and a count of the rest", () => {
    const error = (() => {
      try {
        return resolveRepoConfig({ repo: { allowed_bots: Array.from({ length: 2000 }, (_, i) => i) } }, ORG);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(RepoConfigError);
    const { problems, message } = error as RepoConfigError;
    expect(problems).toHaveLength(21);
    expect(problems.at(-1)).toBe("and 1980 more problems");
    expect(message.length).toBeLessThan(2000);
  });

  test("unknown keys are listed a few at a time, each cut short", () => {
    const repo = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`${"k".repeat(500)}${String(i)}`, 1]));
    const [problem] = problemsOf({}, repo);
    expect(problem).toMatch(/and 45 more$/);
    expect(problem?.length).toBeLessThan(500);
  });
});

describe("money, CI rounds and automatic rounds: the organisation's ceilings", () => {
  test("a repository may lower the organisation's budget and rounds, never raise them", () => {
    const org = {
      budget: { max_cost_usd: 5, daily_usd: 20 },
      max_rounds: 3,
      ci: { fix_attempts: 1, timeout_minutes: 30 },
    };
    const lower = resolveRepoConfig(
      { org, repo: { budget: { max_cost_usd: 2 }, max_rounds: 1, ci: { fix_attempts: 0 } } },
      ORG,
    );
    expect(lower.budget?.max_cost_usd).toBe(2);
    expect(lower.max_rounds).toBe(1);
    expect(lower.ci).toEqual({ enabled: true, fix_attempts: 0, rerun_flaky: true, timeout_minutes: 30 });
    expect(
      problemsOf(org, {
        budget: { max_cost_usd: 50, daily_usd: 100 },
        max_rounds: 9,
        ci: { fix_attempts: 4, timeout_minutes: 600 },
      }),
    ).toEqual([
      "`max_rounds: 9` exceeds the organisation's `max_rounds: 3` (acme/.github), a ceiling",
      "`budget.max_cost_usd: 50` exceeds the organisation's `budget.max_cost_usd: 5` (acme/.github), a ceiling",
      "`budget.daily_usd: 100` exceeds the organisation's `budget.daily_usd: 20` (acme/.github), a ceiling",
      "`ci.fix_attempts: 4` exceeds the organisation's `ci.fix_attempts: 1` (acme/.github), a ceiling",
      "`ci.timeout_minutes: 600` exceeds the organisation's `ci.timeout_minutes: 30` (acme/.github), a ceiling",
    ]);
  });

  test("the organisation's own run budget stays known under a repository's lower one, for raising a paused run", () => {
    const org = { budget: { max_cost_usd: 5 } };
    expect(orgMaxCostUsd(resolveRepoConfig({ org, repo: { budget: { max_cost_usd: 2 } } }, ORG))).toBe(5);
    expect(orgMaxCostUsd(resolveRepoConfig({ org, repo: null }, ORG))).toBe(5);
    // Only a value the organisation wrote binds: its other keys, or none at all, set no ceiling.
    expect(orgMaxCostUsd(resolveRepoConfig({ org: { budget: { daily_usd: 9 } }, repo: null }, ORG))).toBeUndefined();
    expect(orgMaxCostUsd(resolveRepoConfig({ repo: { budget: { max_cost_usd: 3 } } }, ORG))).toBeUndefined();
  });

  test("ci and reviews merge per key: the organisation's choices stay where the repository is silent", () => {
    const config = resolveRepoConfig(
      { org: { ci: { rerun_flaky: false }, reviews: { below_bar: "refuse" } }, repo: { ci: { fix_attempts: 1 } } },
      ORG,
    );
    expect(config.ci).toMatchObject({ rerun_flaky: false, fix_attempts: 1 });
    expect(config.reviews.below_bar).toBe("refuse");
  });
});

describe("every key has a floor rule", () => {
  /** Every key path of the file's schema, down to its leaves. */
  function keysOf(schema: unknown, prefix = ""): string[] {
    const def = (schema as { _zod: { def: Record<string, unknown> } })._zod.def;
    switch (def["type"]) {
      case "optional":
      case "default":
      case "nullable":
        return keysOf(def["innerType"], prefix);
      case "pipe":
        return keysOf(def["out"], prefix);
      case "object":
        return Object.entries(def["shape"] as Record<string, unknown>).flatMap(([key, value]) =>
          keysOf(value, prefix === "" ? key : `${prefix}.${key}`),
        );
      default:
        return [prefix];
    }
  }

  test("the rules name exactly the schema's keys: a new key cannot skip its floor", () => {
    const keys = keysOf(repoConfigSchema);
    expect(keys.length).toBeGreaterThan(30);
    expect(keys.filter((key) => !Object.hasOwn(FLOOR_RULES, key))).toEqual([]);
    expect(Object.keys(FLOOR_RULES).filter((key) => !keys.includes(key))).toEqual([]);
  });

  test.each([
    [{ reviews: { below_bar: "refuse" } }, { reviews: { below_bar: "untrusted" } }, /reviews\.below_bar: untrusted`/],
    [{ reviews: { below_bar: "refuse" } }, { reviews: { below_bar: "approval" } }, /reviews\.below_bar: approval`/],
    [{ reviews: { below_bar: "approval" } }, { reviews: { below_bar: "untrusted" } }, /reviews\.below_bar: untrusted`/],
    [{ reviews: { pull_requests: "harness" } }, { reviews: { pull_requests: "all" } }, /reviews\.pull_requests: all`/],
    [{ reviews: false }, { reviews: true }, /`reviews\.enabled: true` is not allowed/],
    [{ ci: { rerun_flaky: false } }, { ci: { rerun_flaky: true } }, /`ci\.rerun_flaky: true` is not allowed/],
    [{ ci: false }, { ci: { enabled: true } }, /`ci\.enabled: true` is not allowed/],
    [{ pr: { draft: true } }, { pr: { draft: false } }, /`pr\.draft: false` is not allowed/],
    [
      { setup: "npm ci", setup_secrets: ["NPM_TOKEN"] },
      { setup_secrets: ["NPM_TOKEN", "AWS_SECRET"] },
      /`setup_secrets` adds `AWS_SECRET`/,
    ],
  ])("the organisation's %j is a floor against %j", (org, repo, problem) => {
    expect(problemsOf(org, repo)).toEqual([expect.stringMatching(problem)]);
  });

  test("the stricter choice stays the repository's to make", () => {
    const config = resolveRepoConfig(
      {
        org: {
          reviews: { below_bar: "untrusted", pull_requests: "all" },
          ci: { rerun_flaky: true },
          pr: { draft: false },
        },
        repo: {
          reviews: { below_bar: "refuse", pull_requests: "harness" },
          ci: { rerun_flaky: false },
          pr: { draft: true },
        },
      },
      ORG,
    );
    expect(config.reviews).toMatchObject({ below_bar: "refuse", pull_requests: "harness" });
    expect(config.ci.rerun_flaky).toBe(false);
    expect(config.pr.draft).toBe(true);
  });
});

test("an organisation's `ci: false` is not undone by a repository that sets only another ci key", () => {
  expect(resolveRepoConfig({ org: { ci: false }, repo: { ci: { fix_attempts: 1 } } }, ORG).ci).toMatchObject({
    enabled: false,
    fix_attempts: 1,
  });
});
