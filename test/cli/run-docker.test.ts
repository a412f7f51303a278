import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { main, type CliIo } from "../../src/cli/main.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";

// `harness run --sandbox docker` on a repository on this machine: a container on a real Docker
// Engine (the suite's), the result back in the user's repository as its branch.
const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`harness run --sandbox docker: skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

let dir: { path: string; cleanup: () => Promise<void> };
let repo = "";
let image = "";

beforeAll(async () => {
  dir = await scratchDir();
  repo = await makeRepo(join(dir.path, "work"));
  if (live) image = await testImage(live.docker);
}, 300_000);

afterAll(async () => {
  await dir.cleanup();
});

function cli(env: NodeJS.ProcessEnv = {}): { io: CliIo; stderr: () => string } {
  const err = new PassThrough();
  let text = "";
  err.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
  return {
    io: {
      env: { PATH: process.env["PATH"], HOME: process.env["HOME"], ...env },
      stdout: new PassThrough(),
      stderr: err,
    },
    stderr: () => text,
  };
}

const AGENT = ["--agent", "command", "--agent-command", `sh -c "id -u > WHO.txt; echo Hello > GREETING.md"`];

describe("harness run --sandbox docker", () => {
  test("without an image: a usage error saying how to name one, and nothing runs", async () => {
    const run = cli();
    const code = await main(["run", "--repo", repo, "--intent", "Greet", ...AGENT, "--sandbox", "docker"], run.io);
    expect(code).toBe(2);
    expect(run.stderr()).toContain("--sandbox docker needs an image: --image <ref> (or HARNESS_DOCKER_IMAGE)");
  });

  test.skipIf(!live)("a local repository runs in a container and its result comes back as the branch", async () => {
    const head = git(repo, "rev-parse", "HEAD");
    const run = cli({ DOCKER_HOST: live?.host ?? "" });
    const code = await main(
      ["run", "--repo", repo, "--intent", "Greet", ...AGENT, "--sandbox", "docker", "--image", image],
      run.io,
    );
    expect(code, run.stderr()).toBe(0);
    const branch = /The change is on branch (\S+) in /.exec(run.stderr())?.[1] ?? "";
    expect(branch).not.toBe("");
    expect(git(repo, "show", `${branch}:GREETING.md`)).toBe("Hello");
    expect(git(repo, "show", `${branch}:WHO.txt`)).toBe("10001");
    expect(git(repo, "rev-parse", `${branch}^`)).toBe(head);
    expect(git(repo, "rev-parse", "--abbrev-ref", "HEAD")).toBe("main");
  });
});
