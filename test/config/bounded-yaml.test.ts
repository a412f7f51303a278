import { performance } from "node:perf_hooks";
import { describe, expect, test } from "vitest";
import {
  BLUEPRINT_YAML_LIMITS,
  BoundedYamlError,
  CONFIG_YAML_LIMITS,
  parseBoundedYaml,
  type YamlLimits,
} from "../../src/config/bounded-yaml.js";
import { MAX_BLUEPRINT_BYTES, MAX_CONFIG_BYTES } from "../../src/config/load-repo-config.js";
import { parseRepoConfig } from "../../src/config/repo-config.js";
import { fill, hostileShapes, key } from "../helpers/hostile-yaml.js";

/*
 * Anyone who can comment on an issue makes Harness read `.github/harness.yml`, so its parse must
 * stay cheap for the worst file that fits under the size cap. The budget is generous for a slow
 * two-core machine running other test files at the same time; on one, the unbounded parse
 * (the yaml package's defaults, as Probot's config plugin used them) took 0.3–0.9 s for several
 * of these shapes at 64 KiB and 3.5–8.5 s at 256 KiB.
 */
const BUDGET_MS = 300;

function timed(text: string, limits: Readonly<YamlLimits>): { ms: number; outcome: unknown } {
  const started = performance.now();
  let outcome: unknown;
  try {
    parseBoundedYaml(text, limits);
    outcome = "parsed";
  } catch (error) {
    outcome = error;
  }
  return { ms: performance.now() - started, outcome };
}

describe("ordinary YAML", () => {
  test("maps, lists, scalars and block text become plain data", () => {
    const text = [
      "# the config",
      "command: /bot",
      "fix_attempts: 3",
      "draft: false",
      "allow: [registry.npmjs.org, '*.pythonhosted.org']",
      "pr:",
      "  labels:",
      "    - harness",
      "setup: |",
      "  npm ci",
      "  npm run build",
      "",
    ].join("\n");
    expect(parseBoundedYaml(text)).toEqual({
      command: "/bot",
      fix_attempts: 3,
      draft: false,
      allow: ["registry.npmjs.org", "*.pythonhosted.org"],
      pr: { labels: ["harness"] },
      setup: "npm ci\nnpm run build\n",
    });
  });

  test("an empty file, or one of comments only, is null", () => {
    expect(parseBoundedYaml("")).toBeNull();
    expect(parseBoundedYaml("# nothing yet\n")).toBeNull();
    expect(parseBoundedYaml("---\n")).toBeNull();
  });

  test("a few anchors and aliases still work, including a name reused for a new anchor", () => {
    expect(parseBoundedYaml("base: &base [npm, test]\nverify: *base\n")).toEqual({
      base: ["npm", "test"],
      verify: ["npm", "test"],
    });
    expect(parseBoundedYaml("a: &x [1]\nb: [&x 2, *x]\n")).toEqual({ a: [1], b: [2, 2] });
  });

  test("`<<` is an ordinary key, never a merge that copies maps", () => {
    expect(parseBoundedYaml("a: &a {x: 1}\nb: {<<: *a}\n")).toEqual({ a: { x: 1 }, b: { "<<": { x: 1 } } });
  });

  test("nesting up to the limit is fine", () => {
    const depth = CONFIG_YAML_LIMITS.maxDepth;
    expect(() => parseBoundedYaml(`${"[".repeat(depth)}${"]".repeat(depth)}`)).not.toThrow();
    expect(() =>
      parseBoundedYaml(Array.from({ length: depth }, (_, i) => `${" ".repeat(i)}a:`).join("\n") + " 1\n"),
    ).not.toThrow();
  });

  test("the largest plausible real config fits the limits: every key, a 256-entry allow list, comments", () => {
    const lines = [
      "# Harness for acme/widgets: see the README",
      "command: /harness",
      "label: harness",
      "permission: maintain",
      'allowed_bots: ["renovate[bot]", "dependabot[bot]"]',
      "agent: claude-code",
      "setup: npm ci",
      "setup_secrets: [NPM_TOKEN]",
      "verify: [npm, test, --, --reporter=dot]",
      "fix_attempts: 3",
      "timeout_minutes: 90",
      "max_turns: 200",
      "model: claude-sonnet",
      "sandbox:",
      "  provider: daytona",
      "  snapshot: acme-node-22",
      "  resources: { cpu: 4, memory: 8, disk: 20 }",
      "  network: allowlist",
      "  allow:",
      ...Array.from(
        { length: 256 },
        (_, i) => `    - mirror-${String(i)}.registry.example.com   # mirror ${String(i)}, kept for the build farm`,
      ),
      "pr:",
      "  draft: true",
      "  labels: [harness, automated]",
      "  reviewers: [octocat]",
      "allow_workflow_changes: false",
    ];
    const text = `${lines.join("\n")}\n`;
    expect(text.length).toBeLessThan(MAX_CONFIG_BYTES);
    const config = parseRepoConfig(parseBoundedYaml(text, CONFIG_YAML_LIMITS));
    expect(config.sandbox.allow).toHaveLength(256);
  });

  test("a large real blueprint fits the blueprint limits", () => {
    const node = (i: number): string =>
      [
        `  - id: step-${String(i)}`,
        "    kind: agent",
        `    title: Step ${String(i)}`,
        "    prompt: |",
        ...Array.from(
          { length: 40 },
          () => "      Explain the change, then make it; keep the tests passing and the diff small.",
        ),
        "    onFailure: { retry: fix, maxAttempts: 3 }",
      ].join("\n");
    const text = `name: big\nnodes:\n${Array.from({ length: 60 }, (_, i) => node(i)).join("\n")}\n`;
    expect(text.length).toBeLessThan(MAX_BLUEPRINT_BYTES);
    expect((parseBoundedYaml(text, BLUEPRINT_YAML_LIMITS) as { nodes: unknown[] }).nodes).toHaveLength(60);
  });
});

describe("YAML Harness refuses, saying where", () => {
  test.each([
    [
      "a repeated key",
      "a: 1\nb: 2\na: 3\n",
      "repeats the key `a` at line 3, column 1; each key may appear once in a map",
    ],
    [
      "a repeated key deep inside",
      "a:\n  - {b: 1, c: 2, b: 3}\n",
      "repeats the key `b` at line 2, column 18; each key may appear once in a map",
    ],
    [
      "keys that become the same property",
      '{1: x, "1": y}',
      "repeats the key `1` at line 1, column 8; each key may appear once in a map",
    ],
    [
      "a list as a key",
      "? [a, b]\n: 1\n",
      "has a key that is a list or map at line 1, column 3; keys must be plain values",
    ],
    [
      "a second document",
      "a: 1\n---\nb: 2\n",
      "holds more than one YAML document (a second `---` at line 2, column 1); Harness reads one",
    ],
    ["malformed YAML", "a: [1, 2\nb: 3\n", /^is not valid YAML at line \d+, column \d+: /],
    [
      "a stray bracket",
      "a: 1\n]\n",
      "is not valid YAML at line 2, column 1: Unexpected flow-seq-end token in YAML stream",
    ],
    [
      "an alias without an anchor",
      "a: *nowhere\n",
      "is not valid YAML: Unresolved alias (the anchor must be set before the alias): nowhere",
    ],
    [
      "an alias inside the node it refers to (data that contains itself)",
      "allowed_bots: &bots [renovate, *bots]\n",
      "has an alias (`*bots` at line 1, column 32) inside the node it refers to",
    ],
    [
      "the same, through a later anchor of the same name",
      "a: &x [1]\nb: &x [*x]\n",
      "has an alias (`*x` at line 2, column 8) inside the node it refers to",
    ],
    [
      "an alias as a key",
      "a: &a x\n*a : 1\n",
      "has a key that is an alias at line 2, column 1; keys must be plain values",
    ],
    ["nesting one level too deep", `${"[".repeat(65)}${"]".repeat(65)}`, /^nests collections more than 64 levels deep/],
  ])("%s", (_what, text, message) => {
    expect(() => parseBoundedYaml(text)).toThrow(BoundedYamlError);
    expect(() => parseBoundedYaml(text)).toThrow(message);
  });

  test("more tokens than the limit, naming the line it got to", () => {
    expect(() =>
      parseBoundedYaml(
        fill(20_000, (i) => `${key(i)}: 1\n`),
        { ...CONFIG_YAML_LIMITS, maxTokens: 100 },
      ),
    ).toThrow(
      /^is too complex: more than 100 YAML tokens \(keys, values, punctuation, comments, line breaks\) by line \d+$/,
    );
  });

  test("aliases that would expand beyond the budget", () => {
    const laughs = [
      "a0: &a0 [x, x, x, x]",
      "a1: &a1 [*a0, *a0, *a0, *a0]",
      "a2: &a2 [*a1, *a1, *a1, *a1]",
      "a3: [*a2, *a2, *a2, *a2]",
    ].join("\n");
    expect(() => parseBoundedYaml(laughs)).toThrow("uses aliases (`*name`) beyond the 16 Harness allows");
  });
});

describe("hostile input at the size cap finishes well inside the budget", () => {
  test.each(hostileShapes(MAX_CONFIG_BYTES))(
    `.github/harness.yml: %s (64 KiB), < ${String(BUDGET_MS)} ms`,
    (_shape, text) => {
      expect(text.length).toBeGreaterThan(MAX_CONFIG_BYTES * 0.9);
      const { ms, outcome } = timed(text, CONFIG_YAML_LIMITS);
      // Parsed, or refused with a sentence: never a stack overflow or a resource error.
      if (outcome !== "parsed") expect(outcome).toBeInstanceOf(BoundedYamlError);
      expect(ms).toBeLessThan(BUDGET_MS);
    },
  );

  test.each(hostileShapes(MAX_BLUEPRINT_BYTES))(
    `blueprint: %s (256 KiB), < ${String(BUDGET_MS)} ms`,
    (_shape, text) => {
      const { ms, outcome } = timed(text, BLUEPRINT_YAML_LIMITS);
      if (outcome !== "parsed") expect(outcome).toBeInstanceOf(BoundedYamlError);
      expect(ms).toBeLessThan(BUDGET_MS);
    },
  );

  test(
    "with the token limit lifted, duplicate keys are still found in linear time " +
      "(the yaml package's own check is quadratic)",
    () => {
      // 256 KiB of distinct keys, then the first one again: every key must be compared.
      const distinct = fill(256 * 1024 - 20, (i) => `${key(i)}: 1\n`);
      const text = `${distinct}${key(0)}: 2\n`;
      const { ms, outcome } = timed(text, { ...CONFIG_YAML_LIMITS, maxTokens: Number.MAX_SAFE_INTEGER });
      expect(outcome).toBeInstanceOf(BoundedYamlError);
      expect((outcome as Error).message).toBe(
        `repeats the key \`k000000\` at line ${String(distinct.split("\n").length)}, column 1; ` +
          `each key may appear once in a map`,
      );
      // Measured 0.35 s here; the yaml package's uniqueKeys check took 6.3 s on the same input.
      expect(ms).toBeLessThan(2_000);
    },
  );
});
