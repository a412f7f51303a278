import { execFileSync } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { createDaytonaSandbox } from "../../src/sandbox/daytona/sandbox.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { Sandbox } from "../../src/sandbox/types.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { makeBareRepo, scratchDir } from "../helpers/git.js";

/*
 * How the result leaves a sandbox: one streamed read into a host file, counted as it arrives.
 * What the sandbox says about the file's size is a claim; a process the agent left behind may
 * still be writing it, or the "file" may be a pipe it feeds. Either way the copy stops one byte
 * past the limit, leaves nothing behind, and never holds the file in the worker's memory.
 */

const token = fakeToken("ghs_", 38);
const MiB = 1024 * 1024;

let root: { path: string; cleanup: () => Promise<void> };
let hostDir: string;
let gitServer: GitHttpServer;

beforeAll(async () => {
  root = await scratchDir("harness-result-download-");
  await makeBareRepo(root.path, "acme", "widgets");
  gitServer = await startGitHttpServer({ projectRoot: root.path, token });
});

afterAll(async () => {
  await gitServer.close();
  await root.cleanup();
});

let counter = 0;
beforeEach(async () => {
  hostDir = join(root.path, `host-${String((counter += 1))}`);
  await mkdir(hostDir, { mode: 0o700 });
});

/** Zeros, a mebibyte at a time, for as long as anyone reads. */
function endlessZeros(): Readable {
  const chunk = Buffer.alloc(MiB);
  return new Readable({
    read() {
      this.push(chunk);
    },
  });
}

/** Makes `path` a named pipe fed with zeros until its reader goes away; returns how to stop it. */
function endlessPipe(path: string): { stop: () => void; done: Promise<void> } {
  execFileSync("mkfifo", [path]);
  const source = endlessZeros();
  const sink = createWriteStream(path);
  const done = pipeline(source, sink).catch(() => undefined);
  return {
    stop: () => {
      source.destroy();
      sink.destroy();
    },
    done,
  };
}

describe("Daytona: the result is streamed to a host file with a byte counter", () => {
  let daytona: FakeDaytona;
  let box: Sandbox;

  beforeEach(async () => {
    daytona = await startFakeDaytona();
    box = await createDaytonaSandbox({
      repo: "acme/widgets",
      branch: "harness/7-fix",
      runId: "run-7",
      githubToken: token,
      githubServerUrl: gitServer.url,
      daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl },
    });
  });

  afterEach(async () => {
    await box.teardown().catch(() => undefined);
    await daytona.close();
  });

  const requestsTo = (pattern: RegExp) =>
    daytona.requests.filter((request) => pattern.test(`${request.method} ${request.path}`));

  test("an ordinary result arrives whole, in a new private file", async () => {
    await box.uploadFiles([{ path: "out/result.bundle", content: "0123456789" }]);
    const destination = join(hostDir, "result.bundle");
    await expect(box.downloadToFile("out/result.bundle", destination, 10)).resolves.toBe(10);
    expect(await readFile(destination, "utf8")).toBe("0123456789");
    expect((await stat(destination)).mode & 0o777).toBe(0o600);
    // The host file is made here, never written through: one already there is refused.
    await expect(box.downloadToFile("out/result.bundle", destination, 10)).rejects.toThrow(/EEXIST/);
  });

  test("a size over the limit is refused from the file's details, before any transfer", async () => {
    await box.uploadFiles([{ path: "out/result.bundle", content: "0123456789" }]);
    const destination = join(hostDir, "result.bundle");
    await expect(box.downloadToFile("out/result.bundle", destination, 9)).rejects.toThrow(
      /10 bytes, over the 9-byte limit/,
    );
    expect(requestsTo(/\/files\/bulk-download$/)).toEqual([]);
    expect(existsSync(destination)).toBe(false);
  });

  test(
    "a file that keeps growing after its size was asked is cut at the limit and refused, " +
      "without the worker buffering it",
    { timeout: 120_000 },
    async () => {
      // A pipe a left-behind process feeds: its details say 0 bytes, and it never ends.
      const feed = endlessPipe(join(box.workDir, "out.bundle"));
      const destination = join(hostDir, "result.bundle");
      const limit = 256 * MiB;
      const rssBefore = process.memoryUsage().rss;
      try {
        await expect(box.downloadToFile("out.bundle", destination, limit)).rejects.toThrow(
          `out.bundle in the sandbox grew past the ${String(limit)}-byte limit while it was read`,
        );
      } finally {
        feed.stop();
      }
      const rssGrowth = process.memoryUsage().rss - rssBefore;
      await feed.done;
      expect(requestsTo(/\/files\/info$/).length).toBeGreaterThan(0);
      expect(requestsTo(/\/files\/bulk-download$/)).toHaveLength(1);
      // Far less than the quarter gigabyte that crossed (worker and fake server together).
      expect(rssGrowth).toBeLessThan(100 * MiB);
      expect(existsSync(destination)).toBe(false);
    },
  );

  test("downloadBytes counts the same way: a pipe posing as a small file is refused at the limit", async () => {
    const feed = endlessPipe(join(box.workDir, "out.bin"));
    try {
      await expect(box.downloadBytes("out.bin", 4 * MiB)).rejects.toThrow(/grew past the 4194304-byte limit/);
    } finally {
      feed.stop();
    }
    await feed.done;
  });
});

describe("local sandbox: the same copy, from the checkout", () => {
  let box: Sandbox;

  beforeEach(async () => {
    box = await createLocalSandbox({ repo: join(root.path, "acme", "widgets.git"), branch: "harness/local" });
  });

  afterEach(async () => {
    await box.teardown();
  });

  test("copies a result whole into a new private file", async () => {
    await writeFile(join(box.workDir, "result.bundle"), "0123456789");
    const destination = join(hostDir, "result.bundle");
    await expect(box.downloadToFile("result.bundle", destination, 10)).resolves.toBe(10);
    expect(await readFile(destination, "utf8")).toBe("0123456789");
    expect((await stat(destination)).mode & 0o777).toBe(0o600);
  });

  test("refuses a file over the limit, a symlink, a pipe and an escape, leaving no copy", async () => {
    await writeFile(join(box.workDir, "result.bundle"), "0123456789");
    await symlink("/etc/passwd", join(box.workDir, "link.bundle"));
    execFileSync("mkfifo", [join(box.workDir, "pipe.bundle")]);
    const destination = join(hostDir, "result.bundle");
    await expect(box.downloadToFile("result.bundle", destination, 9)).rejects.toThrow(/over the 9-byte limit/);
    await expect(box.downloadToFile("link.bundle", destination, 100_000)).rejects.toThrow();
    await expect(box.downloadToFile("pipe.bundle", destination, 100_000)).rejects.toThrow(/not a regular file/);
    await expect(box.downloadToFile("../../../etc/passwd", destination, 100_000)).rejects.toThrow(/path confinement/);
    expect(existsSync(destination)).toBe(false);
  });
});
