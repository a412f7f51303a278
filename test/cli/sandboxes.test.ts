import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { main, type CliIo } from "../../src/cli/main.js";
import { reapOrphans } from "../../src/runs/reaper.js";
import { dockerInventory } from "../../src/sandbox/docker/inventory.js";
import { SANDBOX_NAME_LABEL, type SandboxRecord } from "../../src/sandbox/inventory.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";

// `harness sandboxes create|exec|diff|pause|resume|apply|delete` on a real Docker Engine (the
// suite's): named sandboxes a person drives by hand, each command its own process's worth of
// work, finding the sandbox again by name.
const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`harness sandboxes (named, Docker): skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

let dir: { path: string; cleanup: () => Promise<void> };
let repo = "";
let image = "";

/** The names this file's sandboxes are given. */
const OUR_NAMES = ["tidy-1", "no-image", "taken", "nowhere"];

beforeAll(async () => {
  dir = await scratchDir();
  repo = await makeRepo(join(dir.path, "work"));
  if (live) image = await testImage(live.docker);
}, 300_000);

afterAll(async () => {
  if (live) {
    // Only this file's: the engine is shared with other files' named sandboxes.
    const left = await live.docker.listContainers({ all: true, filters: { label: [SANDBOX_NAME_LABEL] } });
    const ours = left.filter((info) => OUR_NAMES.includes(info.Labels[SANDBOX_NAME_LABEL] ?? ""));
    await Promise.all(ours.map((info) => live.docker.getContainer(info.Id).remove({ force: true, v: true })));
  }
  await dir.cleanup();
  // Removing a container on vfs storage deletes a whole copy of its image: slow on a busy machine.
}, 120_000);

async function harness(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = "";
  let stderr = "";
  out.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  err.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const io: CliIo = {
    env: {
      PATH: process.env["PATH"],
      HOME: process.env["HOME"],
      DOCKER_HOST: live?.host ?? "",
      HARNESS_DOCKER_IMAGE: image,
      TMPDIR: dir.path,
      HARNESS_DB: join(dir.path, "harness.db"),
    },
    stdout: out,
    stderr: err,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

async function containersNamed(name: string): Promise<number> {
  if (!live) return 0;
  const found = await live.docker.listContainers({ all: true, filters: { label: [`${SANDBOX_NAME_LABEL}=${name}`] } });
  return found.length;
}

describe.skipIf(!live)("harness sandboxes, named, on Docker", () => {
  test("create → exec → diff → pause → resume → apply → delete, each call finding the sandbox by name", async () => {
    const created = await harness("sandboxes", "create", "--repo", repo, "--name", "tidy-1");
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe("tidy-1\n");
    expect(created.stderr).toContain("branch harness/sandbox/tidy-1");

    const edited = await harness(
      "sandboxes",
      "exec",
      "tidy-1",
      "--",
      "sh",
      "-c",
      "echo 'a new line' >> README.md && echo fresh > NEW.txt && id -u",
    );
    expect(edited.code, edited.stderr).toBe(0);
    expect(edited.stdout.trim()).not.toBe("0");
    const failing = await harness("sandboxes", "exec", "tidy-1", "--", "sh", "-c", "echo oops >&2; exit 3");
    expect(failing.code).toBe(3);
    expect(failing.stderr).toContain("oops");

    const diff = await harness("sandboxes", "diff", "tidy-1");
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("+a new line");
    expect(diff.stdout).toContain("+++ b/NEW.txt");

    const listed = await harness("sandboxes", "list", "--sandbox", "docker");
    expect(listed.stdout).toMatch(/^tidy-1\tdocker\trunning\tharness\/sandbox\/tidy-1\t/m);
    // A named sandbox belongs to a person: the reaper leaves it, however old. (Only this
    // container is offered to it: the engine is shared with other files' running sandboxes.)
    const inventory = dockerInventory({ host: live?.host ?? "" });
    const ours = {
      list: async () => (await inventory.list()).filter((record) => record.id === "harness-sandbox-tidy-1"),
      remove: (record: SandboxRecord) => inventory.remove(record),
    };
    expect((await ours.list()).map((record) => record.name)).toEqual(["tidy-1"]);
    expect(await reapOrphans(ours, () => false, { minAgeMs: 0 })).toEqual([]);
    expect(await containersNamed("tidy-1")).toBe(1);

    expect((await harness("sandboxes", "pause", "tidy-1")).code).toBe(0);
    expect((await harness("sandboxes", "list")).stdout).toMatch(/^tidy-1\tdocker\tpaused\t/m);
    const refused = await harness("sandboxes", "exec", "tidy-1", "--", "true");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("is paused: resume it before running anything in it");
    expect((await harness("sandboxes", "resume", "tidy-1")).code).toBe(0);
    expect((await harness("sandboxes", "exec", "tidy-1", "--", "cat", "NEW.txt")).stdout).toBe("fresh\n");

    const before = git(repo, "rev-parse", "HEAD");
    const applied = await harness("sandboxes", "apply", "tidy-1", "--repo", repo);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toBe("harness/sandbox/tidy-1\n");
    expect(git(repo, "rev-parse", "HEAD")).toBe(before);
    expect(git(repo, "show", "harness/sandbox/tidy-1:NEW.txt")).toBe("fresh");
    expect(git(repo, "rev-parse", "harness/sandbox/tidy-1^")).toBe(before);

    // Never onto the branch the repository has checked out.
    git(repo, "checkout", "-q", "harness/sandbox/tidy-1");
    const onto = await harness("sandboxes", "apply", "tidy-1", "--repo", repo);
    git(repo, "checkout", "-q", "-");
    expect(onto.code).toBe(2);
    expect(onto.stderr).toContain("is the branch checked out in");

    expect((await harness("sandboxes", "delete", "tidy-1")).code).toBe(0);
    expect(await containersNamed("tidy-1")).toBe(0);
    const gone = await harness("sandboxes", "exec", "tidy-1", "--", "true");
    expect(gone.code).toBe(2);
    expect(gone.stderr).toContain("No sandbox is named tidy-1");
  }, 120_000);

  test("bad input: each a clear error, and nothing left running", async () => {
    const badName = await harness("sandboxes", "create", "--repo", repo, "--name", "Not_A_Name");
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain("A sandbox name is 1 to 40 lower-case letters");

    const missingImage = await harness(
      "sandboxes",
      "create",
      "--repo",
      repo,
      "--name",
      "no-image",
      "--image",
      "harness-test/not-built-anywhere:1",
    );
    expect(missingImage.code).toBe(1);
    expect(missingImage.stderr).toContain('The Docker image "harness-test/not-built-anywhere:1"');
    expect(await containersNamed("no-image")).toBe(0);

    expect((await harness("sandboxes", "create", "--repo", repo, "--name", "taken")).code).toBe(0);
    const taken = await harness("sandboxes", "create", "--repo", repo, "--name", "taken");
    expect(taken.code).toBe(2);
    expect(taken.stderr).toContain("A sandbox named taken already exists");
    expect(await containersNamed("taken")).toBe(1);

    const outside = await harness("sandboxes", "exec", "taken", "--cwd", "../..", "--", "ls");
    expect(outside.code).toBe(2);
    expect(outside.stderr).toMatch(/path confinement|outside/);

    const daemonDown = await main(["sandboxes", "create", "--repo", repo, "--name", "nowhere"], {
      env: {
        PATH: process.env["PATH"],
        DOCKER_HOST: `unix://${join(dir.path, "no-engine.sock")}`,
        HARNESS_DOCKER_IMAGE: image,
      },
      stdout: new PassThrough(),
      stderr: new PassThrough(),
    });
    expect(daemonDown).toBe(1);

    expect((await harness("sandboxes", "delete", "taken")).code).toBe(0);
    expect((await harness("sandboxes", "delete", "taken")).code).toBe(2);
  }, 120_000);
});
