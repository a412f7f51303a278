import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { BlueprintError, loadBlueprintFile, validateBlueprint } from "../../src/harness/blueprint-file.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { renderTemplate } from "../../src/harness/template.js";
import { scratchDir } from "../helpers/git.js";

const exec = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  kind: "exec",
  title: `Step ${id}`,
  argv: ["true"],
  ...extra,
});
const agent = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  kind: "agent",
  title: `Agent ${id}`,
  prompt: "do {{intent}}",
  ...extra,
});

describe("built-in blueprints", () => {
  test("default: setup → implement → verify ⇄ fix, with maxAttempts = fix rounds + 1", () => {
    const blueprint = builtinBlueprint("default", { setup: ["npm", "ci"], verify: ["npm", "test"], maxFixRounds: 3 });
    expect(blueprint.nodes.map((n) => `${n.id}:${n.kind}:${n.runs}`)).toEqual([
      "setup:exec:always",
      "implement:agent:always",
      "verify:exec:always",
      "fix:agent:on-failure",
    ]);
    expect(blueprint.nodes[2]?.onFailure).toEqual({ retry: "fix", maxAttempts: 4 });
  });

  test("default without setup or verify is just the agent", () => {
    expect(builtinBlueprint("default").nodes.map((n) => n.id)).toEqual(["implement"]);
  });

  test("default with zero fix rounds has no fix node", () => {
    expect(builtinBlueprint("default", { verify: ["make"], maxFixRounds: 0 }).nodes.map((n) => n.id)).toEqual([
      "implement",
      "verify",
    ]);
  });

  test("command runs the one command and needs it", () => {
    expect(builtinBlueprint("command", { command: ["npx", "prettier", "--write", "."] }).nodes).toMatchObject([
      { kind: "exec", argv: ["npx", "prettier", "--write", "."] },
    ]);
    expect(() => builtinBlueprint("command")).toThrow(/needs the command to run/);
  });

  test("an unknown blueprint names the known ones", () => {
    expect(() => builtinBlueprint("nightly")).toThrow(/Unknown blueprint "nightly": use one of default, command/);
  });
});

describe("blueprint validation", () => {
  test.each([
    [
      "a retry that points nowhere",
      [exec("verify", { onFailure: { retry: "fix", maxAttempts: 2 } })],
      /node "verify" \(nodes\[0\]\), field onFailure.retry: points to "fix", which is not a node/,
    ],
    [
      "nested retry loops",
      [
        exec("a", { onFailure: { retry: "b", maxAttempts: 2 } }),
        exec("b", { onFailure: { retry: "a", maxAttempts: 2 } }),
      ],
      /retry loops must not nest/,
    ],
    [
      "an unbounded loop (no maxAttempts)",
      [exec("a", { onFailure: { retry: "a" } })],
      /node "a" \(nodes\[0\]\), field onFailure.maxAttempts: is required/,
    ],
    ["too many attempts", [exec("a", { onFailure: { retry: "a", maxAttempts: 1000 } })], /maxAttempts/],
    [
      "an unknown template variable",
      [agent("a", { prompt: "{{secrets}}" })],
      /field prompt: uses the unknown template variable \{\{secrets\}\}/,
    ],
    [
      "an unknown variable in argv",
      [exec("a", { argv: ["echo", "{{env.HOME}}"] })],
      /field argv.1: uses the unknown template variable/,
    ],
    ["duplicate ids", [exec("a"), exec("a")], /duplicates the id of nodes\[0\]/],
    [
      "an on-failure node nothing retries through",
      [exec("a"), agent("fix", { runs: "on-failure" })],
      /is 'on-failure' but no other node retries through it/,
    ],
    ["an unknown node kind", [{ id: "a", kind: "shell", title: "x" }], /kind must be "exec" or "agent"/],
    ["an empty argv", [exec("a", { argv: [] })], /field argv: must name at least the program/],
    ["an unknown field", [exec("a", { colour: "red" })], /unknown field colour/],
    [
      "setup secrets asked for by an agent step (only exec steps may have them)",
      [agent("a", { secrets: ["NPM_TOKEN"] })],
      /unknown field secrets/,
    ],
    [
      "a setup secret that is not an environment variable name",
      [exec("a", { secrets: ["npm token"] })],
      /field secrets.0: must be an environment variable name/,
    ],
    ["an id with spaces", [exec("my step")], /field id: must be lowercase/],
  ])("rejects %s, naming the node and field", (_label, nodes, message) => {
    expect(() => validateBlueprint({ name: "x", nodes }, "blueprint x.yml")).toThrow(BlueprintError);
    expect(() => validateBlueprint({ name: "x", nodes }, "blueprint x.yml")).toThrow(message);
  });

  test("a self-retry (a flaky step) is allowed and bounded", () => {
    expect(
      validateBlueprint({ name: "x", nodes: [exec("a", { onFailure: { retry: "a", maxAttempts: 3 } })] }, "x").nodes[0]
        ?.onFailure,
    ).toEqual({ retry: "a", maxAttempts: 3 });
  });

  test("no nodes at all is refused", () => {
    expect(() => validateBlueprint({ name: "x", nodes: [] }, "blueprint x.yml")).toThrow(/at least one node/);
  });
});

describe("blueprint files", () => {
  let dir: { path: string; cleanup: () => Promise<void> };
  beforeEach(async () => {
    dir = await scratchDir();
  });
  afterEach(async () => {
    await dir.cleanup();
  });

  test("loads a YAML blueprint with defaults applied", async () => {
    const file = join(dir.path, "ci.yml");
    await writeFile(
      file,
      "name: ci\nnodes:\n  - id: lint\n    kind: exec\n    title: Lint\n    argv: [npm, run, lint]\n" +
        "    timeoutMinutes: 5\n",
    );
    expect(await loadBlueprintFile(file)).toEqual({
      name: "ci",
      nodes: [
        {
          id: "lint",
          kind: "exec",
          title: "Lint",
          argv: ["npm", "run", "lint"],
          timeoutMinutes: 5,
          allowFailure: false,
          runs: "always",
        },
      ],
    });
  });

  test("broken YAML names the file and the line", async () => {
    const file = join(dir.path, "bad.yml");
    await writeFile(file, "name: x\nnodes:\n  - id: [a\n");
    await expect(loadBlueprintFile(file)).rejects.toThrow(new RegExp(`blueprint ${file}: not valid YAML at line \\d+`));
  });

  test("a missing file says so", async () => {
    await expect(loadBlueprintFile(join(dir.path, "nope.yml"))).rejects.toThrow(
      /cannot read the file \(it does not exist\)/,
    );
  });
});

describe("templates", () => {
  test("substitutes in one pass: text from a value is never expanded again", () => {
    expect(renderTemplate("{{intent}} on {{branch}}", { intent: "print {{branch}}", branch: "b1" })).toBe(
      "print {{branch}} on b1",
    );
  });

  test("unset variables render empty", () => {
    expect(renderTemplate("[{{issue.title}}]", {})).toBe("[]");
  });
});
