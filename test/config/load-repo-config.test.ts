import { generateKeyPairSync } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import {
  loadRepoConfig,
  MAX_BLUEPRINT_BYTES,
  MAX_CONFIG_BYTES,
  resolveBlueprint,
  type ConfigCapableOctokit,
} from "../../src/config/load-repo-config.js";
import { parseRepoConfig, RepoConfigError } from "../../src/config/repo-config.js";
import { BlueprintError } from "../../src/harness/blueprint-file.js";
import { faults, startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";

/*
 * The loader against the fake GitHub over HTTP, through the contents API as the app calls it:
 * the repository's file, the organisation's in its `.github` repository, and how either can fail.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One key for the file: generating an RSA key per test would dominate the run time. */
const APP_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
  .privateKey.export({ type: "pkcs8", format: "pem" })
  .toString();
const CONFIG = ".github/harness.yml";
const ONE_MIB = 1024 * 1024;

interface World {
  fake: FakeGitHub;
  octokit: ConfigCapableOctokit;
}

/**
 * `acme/widgets` (with `repo` as its `.github/harness.yml` when given) and, when `org` is given,
 * `acme/.github` holding it; an installation on the organisation reading both.
 */
async function world(
  files: { repo?: string; org?: string; orgRepoWithoutFile?: boolean; otherRepoFiles?: Record<string, string> } = {},
  installedOn: "all" | string[] = "all",
): Promise<World> {
  const fake = await startFakeGitHub();
  cleanups.push(() => fake.close());
  fake.addApp({ id: 4242, slug: "harness", privateKeyPem: APP_KEY });
  await fake.addRepo({
    owner: "acme",
    name: "widgets",
    ownerType: "Organization",
    files: {
      "README.md": "# widgets\n",
      ...files.otherRepoFiles,
      ...(files.repo === undefined ? {} : { [CONFIG]: files.repo }),
    },
  });
  if (files.org !== undefined || files.orgRepoWithoutFile) {
    await fake.addRepo({
      owner: "acme",
      name: ".github",
      ownerType: "Organization",
      files: { "profile/README.md": "# acme\n", ...(files.org === undefined ? {} : { [CONFIG]: files.org }) },
    });
  }
  const installation = fake.addInstallation({
    account: "acme",
    accountType: "Organization",
    permissions: { contents: "read", issues: "write" },
    repositories: installedOn,
  });
  const octokit = new Octokit({
    baseUrl: fake.apiUrl,
    auth: fake.mintToken(installation.id),
  }) as unknown as ConfigCapableOctokit;
  return { fake, octokit };
}

/** The error a load fails with; fails the test when it succeeds. */
async function failure(load: Promise<unknown>): Promise<unknown> {
  try {
    await load;
  } catch (error) {
    return error;
  }
  throw new Error("expected the load to fail");
}

const contentsRequests = (fake: FakeGitHub): string[] =>
  fake.requests
    .filter((r) => r.route === "GET /repos/{owner}/{repo}/contents/{path*}")
    .map((r) => decodeURIComponent(r.path.replace(/^\/api\/v3/, "")));

describe("loadRepoConfig reads both files from GitHub", () => {
  test("no file anywhere (and no `.github` repository) gives the defaults", async () => {
    const { fake, octokit } = await world();
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toEqual(parseRepoConfig({}));
    expect(contentsRequests(fake).sort()).toEqual([
      "/repos/acme/.github/contents/.github/harness.yml",
      "/repos/acme/widgets/contents/.github/harness.yml",
    ]);
  });

  test("a `.github` repository without the file gives the defaults too", async () => {
    const { octokit } = await world({ orgRepoWithoutFile: true });
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toEqual(parseRepoConfig({}));
  });

  test("the repository's file alone", async () => {
    const { octokit } = await world({ repo: "command: /robot\nverify: npm test\n" });
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({
      command: "/robot",
      verify: "npm test",
      permission: "write",
    });
  });

  test("the organisation's file alone applies to a repository without one", async () => {
    const { octokit } = await world({ org: "command: /org-bot\npr:\n  labels: [automated]\n" });
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({
      command: "/org-bot",
      pr: { draft: true, labels: ["automated"] },
    });
  });

  test("both files merge key by key, the repository's keys winning", async () => {
    const org =
      "command: /org-bot\nverify: make check\npr:\n  labels: [automated]\n" +
      "sandbox:\n  resources: { cpu: 4, memory: 8 }\n";
    const repo = "verify: npm test\npr:\n  draft: false\nsandbox:\n  resources: { cpu: 2 }\n";
    const { octokit } = await world({ org, repo });
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({
      command: "/org-bot",
      verify: "npm test",
      pr: { draft: false, labels: ["automated"] },
      sandbox: { resources: { cpu: 2, memory: 8 } },
    });
  });

  test("the organisation's `permission: admin` holds for a repository file that does not mention it", async () => {
    const { octokit } = await world({ org: "permission: admin\n", repo: "verify: npm test\n" });
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({ permission: "admin", verify: "npm test" });
  });

  test("a repository that lowers the organisation's permission is refused, both values named", async () => {
    const { octokit } = await world({ org: "permission: admin\n", repo: "permission: write\n" });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect(error).toBeInstanceOf(RepoConfigError);
    expect((error as RepoConfigError).problems).toEqual([
      "`permission: write` is below the organisation's `permission: admin` (acme/.github); " +
        "a repository may raise the bar, not lower it",
    ]);
  });

  test("the `.github` repository itself is read once, as the organisation's file", async () => {
    const { fake, octokit } = await world({ org: "permission: maintain\n" });
    expect(await loadRepoConfig(octokit, "acme", ".github")).toMatchObject({ permission: "maintain" });
    expect(contentsRequests(fake)).toEqual(["/repos/acme/.github/contents/.github/harness.yml"]);
  });

  test(
    "an installation that does not cover `.github` reads the repository's file alone " + "(GitHub answers 404)",
    async () => {
      const { octokit } = await world({ org: "permission: admin\n", repo: "command: /robot\n" }, ["widgets"]);
      expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({
        command: "/robot",
        permission: "write",
      });
    },
  );
});

describe("loadRepoConfig refuses what it cannot use", () => {
  test("a 1 MiB file is refused by its size, naming both numbers", async () => {
    const { octokit } = await world({ repo: `# ${"x".repeat(ONE_MIB - 3)}\n` });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect(error).toBeInstanceOf(RepoConfigError);
    expect((error as RepoConfigError).problems).toEqual([
      "`.github/harness.yml` is 1,048,576 bytes; Harness reads at most 65,536",
    ]);
  });

  test("a file over GitHub's 1 MB contents limit (sent without content) is refused by its size", async () => {
    const { octokit } = await world({ org: `# ${"x".repeat(2 * ONE_MIB - 3)}\n` });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect((error as RepoConfigError).problems).toEqual([
      "acme/.github (the organisation's `.github` repository): `.github/harness.yml` is 2,097,152 bytes; " +
        "Harness reads at most 65,536",
    ]);
  });

  test("a file just under the cap is read", async () => {
    const { octokit } = await world({ repo: `command: /robot\n# ${"x".repeat(MAX_CONFIG_BYTES - 19)}\n` });
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({ command: "/robot" });
  });

  test("invalid YAML is refused with the line and column", async () => {
    const { octokit } = await world({ repo: "command: /robot\npr: [draft\n" });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect(error).toBeInstanceOf(RepoConfigError);
    expect((error as RepoConfigError).message).toMatch(
      /^\.github\/harness\.yml is invalid: `\.github\/harness\.yml` is not valid YAML at line \d+, column \d+: /,
    );
  });

  test("problems in both files are reported together, each saying which file", async () => {
    const { octokit } = await world({ org: "a: 1\na: 2\n", repo: "---\n---\n" });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect((error as RepoConfigError).problems).toEqual([
      "acme/.github (the organisation's `.github` repository): `.github/harness.yml` repeats the key `a` at " +
        "line 2, column 1; each key may appear once in a map",
      "`.github/harness.yml` holds more than one YAML document (a second `---` at line 2, column 1); Harness reads one",
    ]);
  });

  test("`_extends` is refused: Harness merges the organisation's file by itself", async () => {
    const { octokit } = await world({ repo: "_extends: .github\nverify: npm test\n" });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect((error as RepoConfigError).problems).toEqual([
      "`_extends` is not supported: Harness merges the organisation's defaults from `.github/harness.yml` in " +
        "acme/.github by itself; remove `_extends`",
    ]);
  });

  test("an invalid organisation file is reported as the organisation's", async () => {
    const { octokit } = await world({ org: "timeout_minutes: -5\n", repo: "verify: npm test\n" });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect((error as RepoConfigError).problems).toEqual([
      expect.stringMatching(/^acme\/\.github \(the organisation's `\.github` repository\): `timeout_minutes` /),
    ]);
  });

  test("a directory where the file should be is refused", async () => {
    const { octokit } = await world({ otherRepoFiles: { ".github/harness.yml/settings.yml": "command: /robot\n" } });
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect((error as RepoConfigError).problems).toEqual(["`.github/harness.yml` is a directory, not a file"]);
  });
});

describe("loadRepoConfig and GitHub's failures", () => {
  test("a 500 for the repository's file propagates unchanged, to be retried later", async () => {
    const { fake, octokit } = await world({ repo: "command: /robot\n" });
    fake.injectFault({ method: "GET", pathPattern: /\/repos\/acme\/widgets\/contents\// }, faults.serverError(500));
    const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
    expect(error).not.toBeInstanceOf(RepoConfigError);
    expect(error).toMatchObject({ status: 500 });
  });

  test("a 500 for the organisation's file propagates too: its floor cannot be skipped", async () => {
    const { fake, octokit } = await world({ org: "permission: admin\n", repo: "command: /robot\n" });
    fake.injectFault({ method: "GET", pathPattern: /\/repos\/acme\/\.github\/contents\// }, faults.serverError(502));
    expect(await failure(loadRepoConfig(octokit, "acme", "widgets"))).toMatchObject({ status: 502 });
    // The next read, with GitHub well again, sees the organisation's floor.
    expect(await loadRepoConfig(octokit, "acme", "widgets")).toMatchObject({ command: "/robot", permission: "admin" });
  });
});

describe("the size cap comes before any decoding or parsing", () => {
  /** GitHub's answer for a file, served at once so only Harness's own work is timed. */
  function answering(content: Buffer): ConfigCapableOctokit {
    const data = {
      type: "file",
      encoding: "base64",
      size: content.length,
      name: "harness.yml",
      path: CONFIG,
      sha: "0".repeat(40),
      content: content.toString("base64"),
    };
    return {
      request: (_route, params) =>
        params?.["repo"] === "widgets"
          ? Promise.resolve({ data })
          : Promise.reject(Object.assign(new Error("Not Found"), { status: 404 })),
    };
  }

  test("a 1 MiB file is refused by its size in under 20 ms, never decoded or parsed", async () => {
    const keys = Buffer.from(
      Array.from({ length: ONE_MIB / 16 }, (_, i) => `k${String(i).padStart(11, "0")}: 1\n`).join(""),
    );
    expect(keys.length).toBe(ONE_MIB);
    const octokit = answering(keys);
    // Once first, so compiling the code path is not what gets timed; then the best of three, so
    // a garbage collection landing in one attempt does not either. A parse would cost every time.
    await failure(loadRepoConfig(octokit, "acme", "widgets"));
    const attempts: number[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const started = performance.now();
      const error = await failure(loadRepoConfig(octokit, "acme", "widgets"));
      attempts.push(performance.now() - started);
      expect((error as RepoConfigError).problems).toEqual([
        "`.github/harness.yml` is 1,048,576 bytes; Harness reads at most 65,536",
      ]);
    }
    expect(Math.min(...attempts)).toBeLessThan(20);
  });

  test("a `size` that understates the content still cannot smuggle in more than the cap", async () => {
    const content = Buffer.from(`# ${"x".repeat(MAX_CONFIG_BYTES * 2)}\n`);
    const data = { type: "file", encoding: "base64", size: 10, content: content.toString("base64") };
    const octokit: ConfigCapableOctokit = {
      request: (_route, params) =>
        params?.["repo"] === "widgets"
          ? Promise.resolve({ data })
          : Promise.reject(Object.assign(new Error("Not Found"), { status: 404 })),
    };
    expect(((await failure(loadRepoConfig(octokit, "acme", "widgets"))) as RepoConfigError).problems).toEqual([
      `\`.github/harness.yml\` is ${content.length.toLocaleString("en-US")} bytes; Harness reads at most 65,536`,
    ]);
  });
});

describe("resolveBlueprint reads a blueprint file within its own cap", () => {
  const BLUEPRINT =
    "name: lint-fix\nnodes:\n  - id: lint\n    kind: exec\n    title: Run the linter\n    argv: [npm, run, lint]\n";

  test("a blueprint file on the default branch is read and validated", async () => {
    const { octokit } = await world({ repo: "blueprint: ci/lint.yml\n", otherRepoFiles: { "ci/lint.yml": BLUEPRINT } });
    const config = await loadRepoConfig(octokit, "acme", "widgets");
    const blueprint = await resolveBlueprint(octokit, "acme", "widgets", config);
    expect(blueprint.nodes.map((node) => node.id)).toEqual(["lint"]);
  });

  test("a missing blueprint file says so", async () => {
    const { octokit } = await world({ repo: "blueprint: ci/nowhere.yml\n" });
    const config = await loadRepoConfig(octokit, "acme", "widgets");
    await expect(resolveBlueprint(octokit, "acme", "widgets", config)).rejects.toThrow(
      new BlueprintError(
        "blueprint ci/nowhere.yml (from .github/harness.yml): no such file on the default branch; " +
          "use default, command, or the path of a YAML file",
      ),
    );
  });

  test("a blueprint file over 256 KiB is refused by its size", async () => {
    const { octokit } = await world({
      repo: "blueprint: ci/huge.yml\n",
      otherRepoFiles: { "ci/huge.yml": `${BLUEPRINT}# ${"x".repeat(MAX_BLUEPRINT_BYTES)}\n` },
    });
    const config = await loadRepoConfig(octokit, "acme", "widgets");
    const size = (BLUEPRINT.length + MAX_BLUEPRINT_BYTES + 3).toLocaleString("en-US");
    await expect(resolveBlueprint(octokit, "acme", "widgets", config)).rejects.toThrow(
      new BlueprintError(`blueprint ci/huge.yml is ${size} bytes; Harness reads at most 262,144`),
    );
  });

  test("a 2 MB blueprint file, which GitHub sends without content, is refused by its size, not parsed", async () => {
    const { octokit } = await world({
      repo: "blueprint: ci/huge.yml\n",
      otherRepoFiles: { "ci/huge.yml": `# ${"x".repeat(2 * ONE_MIB - 3)}\n` },
    });
    const config = await loadRepoConfig(octokit, "acme", "widgets");
    await expect(resolveBlueprint(octokit, "acme", "widgets", config)).rejects.toThrow(
      new BlueprintError("blueprint ci/huge.yml is 2,097,152 bytes; Harness reads at most 262,144"),
    );
  });

  test("a blueprint with duplicate keys is refused with the line", async () => {
    const { octokit } = await world({
      repo: "blueprint: ci/lint.yml\n",
      otherRepoFiles: { "ci/lint.yml": `${BLUEPRINT}name: again\n` },
    });
    const config = await loadRepoConfig(octokit, "acme", "widgets");
    await expect(resolveBlueprint(octokit, "acme", "widgets", config)).rejects.toThrow(
      new BlueprintError(
        "blueprint ci/lint.yml repeats the key `name` at line 7, column 1; each key may appear once in a map",
      ),
    );
  });

  test("GitHub failing propagates rather than posing as a missing file", async () => {
    const { fake, octokit } = await world({
      repo: "blueprint: ci/lint.yml\n",
      otherRepoFiles: { "ci/lint.yml": BLUEPRINT },
    });
    const config = await loadRepoConfig(octokit, "acme", "widgets");
    fake.injectFault({ method: "GET", pathPattern: "/ci%2Flint.yml" }, faults.serverError(503));
    expect(await failure(resolveBlueprint(octokit, "acme", "widgets", config))).toMatchObject({ status: 503 });
  });
});
