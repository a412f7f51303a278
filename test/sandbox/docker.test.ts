import { existsSync } from "node:fs";
import { chmod, mkdir, readdir, readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { dockerInventory } from "../../src/sandbox/docker/inventory.js";
import { containerSpec, RELAY_DIR, type ContainerSpecInput } from "../../src/sandbox/docker/container-spec.js";
import { createDockerSandbox, type DockerSandbox } from "../../src/sandbox/docker/sandbox.js";
import type { SandboxOptions } from "../../src/sandbox/types.js";
import { InvalidInputError, PathConfinementError, SandboxError } from "../../src/util/errors.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { startGitHttpServer } from "../fakes/git-http-server.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, makeRepo, scratchDir } from "../helpers/git.js";

/*
 * The Docker sandbox against a real Docker Engine: the running one, or a daemon the helper
 * starts for these tests (vfs, no bridge), with a small image built from this machine's own
 * programs. Each test asserts what a run's commands can and cannot do in it.
 */

const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`Docker sandbox tests skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

let image = "";
let root: { path: string; cleanup: () => Promise<void> };
let repo = "";
const made: DockerSandbox[] = [];

async function sandbox(
  overrides: Partial<SandboxOptions> = {},
  docker: { image?: string; nodePath?: string } = {},
): Promise<DockerSandbox> {
  if (!live) throw new Error("no engine");
  const created = await createDockerSandbox(
    { repo, branch: "harness/run", network: { mode: "none" }, ...overrides },
    {
      image,
      host: live.host,
      memoryBytes: 512 * 1024 ** 2,
      cpus: 1,
      pidsLimit: 256,
      tmpfsBytes: 64 * 1024 ** 2,
      ...docker,
    },
  );
  made.push(created);
  return created;
}

beforeAll(async () => {
  if (!live) return;
  image = await testImage(live.docker);
  root = await scratchDir("harness-docker-test-");
  repo = await makeRepo(join(root.path, "repo"));
}, 300_000);

afterAll(async () => {
  for (const each of made) await each.teardown();
  if (live) await root.cleanup();
  if (live) await live.stop();
}, 120_000);

describe("the Docker sandbox's container spec", () => {
  const input: ContainerSpecInput = {
    name: "harness-x",
    image: "img",
    labels: { app: "harness" },
    uid: 10001,
    gid: 10001,
    initUid: 10002,
    memoryBytes: 1024,
    cpus: 1.5,
    pidsLimit: 64,
    tmpfsBytes: 4096,
    network: "none",
    openNetwork: "bridge",
    socketBinds: [{ host: "/run/harness/gateway", container: `${RELAY_DIR}/gateway` }],
    cmd: ["sleep", "infinity"],
  };

  test("asks for no capability, a read-only root, limits, no network, and only socket folders bound", () => {
    const spec = containerSpec(input);
    // The container's own first process: another uid than the commands', in their group.
    expect(spec.User).toBe("10002:10001");
    expect(spec.HostConfig?.CapDrop).toEqual(["ALL"]);
    expect(spec.HostConfig?.SecurityOpt).toEqual(["no-new-privileges:true"]);
    expect(spec.HostConfig?.ReadonlyRootfs).toBe(true);
    expect(spec.HostConfig?.Privileged).toBe(false);
    expect(spec.HostConfig?.NetworkMode).toBe("none");
    expect(spec.HostConfig?.PidsLimit).toBe(64);
    expect(spec.HostConfig?.Memory).toBe(1024);
    expect(spec.HostConfig?.MemorySwap).toBe(1024);
    expect(spec.HostConfig?.NanoCpus).toBe(1_500_000_000);
    expect(spec.HostConfig?.Binds).toEqual([`/run/harness/gateway:${RELAY_DIR}/gateway:ro`]);
    expect(spec.HostConfig?.Mounts).toBeUndefined();
    expect(containerSpec({ ...input, network: "open" }).HostConfig?.NetworkMode).toBe("bridge");
  });

  test("refuses root, commands as the container's own uid, and a bind anywhere but the relay folder", () => {
    expect(() => containerSpec({ ...input, uid: 0 })).toThrow(InvalidInputError);
    expect(() => containerSpec({ ...input, gid: 0 })).toThrow(InvalidInputError);
    expect(() => containerSpec({ ...input, initUid: 0 })).toThrow(InvalidInputError);
    expect(() => containerSpec({ ...input, initUid: 10001 })).toThrow(/another uid than its commands/);
    expect(() => containerSpec({ ...input, socketBinds: [{ host: "/", container: "/host" }] })).toThrow(
      InvalidInputError,
    );
    expect(() => containerSpec({ ...input, socketBinds: [{ host: "/a:/b", container: `${RELAY_DIR}/x` }] })).toThrow(
      InvalidInputError,
    );
  });
});

describe("a Docker Engine that is not there", () => {
  test("gives one error naming the engine and what to do", async () => {
    const dir = await scratchDir("harness-docker-down-");
    try {
      const local = await makeRepo(join(dir.path, "repo"));
      const attempt = createDockerSandbox(
        { repo: local, branch: "harness/run", network: { mode: "none" } },
        { image: "any", host: `unix://${join(dir.path, "no-such-docker.sock")}` },
      );
      await expect(attempt).rejects.toThrow(SandboxError);
      await expect(attempt).rejects.toThrow(
        /Docker Engine at unix:\/\/.*no-such-docker\.sock is not reachable.*start it/,
      );
      await expect(dockerInventory({ host: `unix://${join(dir.path, "no.sock")}` }).list()).rejects.toThrow(
        /not reachable/,
      );
    } finally {
      await dir.cleanup();
    }
  });
});

describe.skipIf(!live)("the Docker sandbox on a real engine", () => {
  let shared: DockerSandbox;
  beforeAll(async () => {
    shared = await sandbox({ runId: "shared-run", labels: { repo: "test/repo" } });
  }, 120_000);

  const run = (argv: string[], extra: { timeout?: number; stdin?: string; env?: Record<string, string> } = {}) =>
    shared.exec({ argv, cwd: shared.workDir, timeout: extra.timeout ?? 20_000, ...extra });

  test("runs a command in the checkout on the run's branch, with exit codes, stdout and stderr apart", async () => {
    const result = await run(["sh", "-c", "git branch --show-current; cat README.md; echo oops >&2; exit 3"]);
    expect(result.exitCode).toBe(3);
    expect(result.stdout).toBe("harness/run\n# test repo\n");
    expect(result.stderr).toBe("oops\n");
    const missing = await run(["no-such-program"]);
    expect(missing.exitCode).toBe(127);
  });

  test("passes stdin and per-command env, and keeps only the tail of long output", async () => {
    expect((await run(["cat"], { stdin: "from stdin" })).stdout).toBe("from stdin");
    expect((await run(["sh", "-c", 'printf %s "$ONE"'], { env: { ONE: "1" } })).stdout).toBe("1");
    expect((await run(["sh", "-c", 'printf %s "${ONE:-unset}"'])).stdout).toBe("unset");
    const long = await shared.exec({
      argv: ["seq", "1", "100000"],
      cwd: shared.workDir,
      timeout: 20_000,
      maxOutput: 100,
    });
    expect(long.truncated).toBe(true);
    expect(long.stdout).toContain("100000\n");
  });

  test("a timeout kills the command and what it started in the background", async () => {
    const started = Date.now();
    const result = await run(["sh", "-c", "sleep 30 & echo $! > /tmp/bg; wait"], { timeout: 1_000 });
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBe(124);
    expect(Date.now() - started).toBeLessThan(10_000);
    const alive = await run(["sh", "-c", 'kill -0 "$(cat /tmp/bg)" 2>/dev/null && echo alive || echo gone']);
    expect(alive.stdout).toBe("gone\n");
  });

  test("a cancel kills the command", async () => {
    const controller = new AbortController();
    const pending = shared.exec({
      argv: ["sleep", "30"],
      cwd: shared.workDir,
      timeout: 60_000,
      signal: controller.signal,
    });
    controller.abort();
    const result = await pending;
    expect(result.cancelled).toBe(true);
    expect(result.exitCode).toBe(130);
    // SIGTERM reached it: no wait for the SIGKILL that follows after two seconds.
    expect(result.durationMs).toBeLessThan(2_000);
  });

  test("refuses a cwd outside the checkout, lexically or through a planted symlink", async () => {
    await expect(shared.exec({ argv: ["true"], cwd: "/etc", timeout: 5_000 })).rejects.toThrow(PathConfinementError);
    await run(["ln", "-sfn", "/", "escape"]);
    const escaped = await shared.exec({ argv: ["ls"], cwd: join(shared.workDir, "escape"), timeout: 5_000 });
    expect(escaped.exitCode).toBe(126);
    expect(escaped.stderr).toMatch(/outside the sandbox/);
    await run(["rm", "-f", "escape"]);
  });

  test("uploads and downloads inside the checkout, and refuses paths that leave it", async () => {
    await shared.uploadFiles([
      { path: "notes/a.txt", content: "alpha" },
      { path: join(shared.workDir, "b.txt"), content: "beta ✓" },
    ]);
    expect(await shared.downloadFile("notes/a.txt")).toBe("alpha");
    expect(await shared.downloadFile("b.txt")).toBe("beta ✓");
    expect((await run(["stat", "-c", "%u", "notes/a.txt"])).stdout.trim()).toBe("10001");

    await expect(shared.uploadFiles([{ path: "../outside.txt", content: "x" }])).rejects.toThrow(PathConfinementError);
    await expect(shared.downloadFile("/etc/passwd")).rejects.toThrow(PathConfinementError);
    await run(["ln", "-sfn", "/etc", "etc-link"]);
    await run(["ln", "-sfn", "/etc/passwd", "passwd-link"]);
    await expect(shared.downloadFile("etc-link/passwd")).rejects.toThrow(PathConfinementError);
    await expect(shared.downloadBytes("passwd-link", 1_000_000)).rejects.toThrow();
    // A batch with one bad path writes nothing.
    await expect(
      shared.uploadFiles([
        { path: "fine.txt", content: "x" },
        { path: "etc-link/evil", content: "x" },
      ]),
    ).rejects.toThrow(PathConfinementError);
    expect((await run(["ls", "fine.txt"])).exitCode).not.toBe(0);
    await run(["rm", "-f", "etc-link", "passwd-link"]);
  });

  test("reads bytes and copies files out within a byte cap, leaving nothing when refused", async () => {
    await run(["sh", "-c", "seq 1 1000 > numbers.txt"]);
    const size = Number((await run(["stat", "-c", "%s", "numbers.txt"])).stdout.trim());
    expect((await shared.downloadBytes("numbers.txt", size)).length).toBe(size);
    await expect(shared.downloadBytes("numbers.txt", size - 1)).rejects.toThrow(/over the .*-byte limit/);
    const destination = join(root.path, "numbers-copy.txt");
    expect(await shared.downloadToFile("numbers.txt", destination, size)).toBe(size);
    expect((await readFile(destination, "utf8")).split("\n")[999]).toBe("1000");
    const refused = join(root.path, "numbers-refused.txt");
    await expect(shared.downloadToFile("numbers.txt", refused, 10)).rejects.toThrow(SandboxError);
    expect(existsSync(refused)).toBe(false);
    await expect(shared.downloadBytes("notes", 100)).rejects.toThrow(/not a regular file/);
  });

  test("scratch files live outside the checkout, readable by commands but not theirs to change", async () => {
    const path = await shared.writeScratchFile("prompt.md", "the prompt");
    expect(path.startsWith(`${shared.workDir}/`)).toBe(false);
    expect((await run(["cat", path])).stdout).toBe("the prompt");
    expect((await run(["sh", "-c", `echo changed > ${path}`])).exitCode).not.toBe(0);
    expect((await run(["rm", "-f", path])).exitCode).not.toBe(0);
    expect((await run(["git", "status", "--porcelain", "--untracked-files=all"])).stdout).not.toContain("prompt");
    await shared.writeScratchFile("prompt.md", "again");
    expect((await run(["cat", path])).stdout).toBe("again");
    await shared.removeScratchFile("prompt.md");
    expect((await run(["cat", path])).exitCode).not.toBe(0);
    await shared.removeScratchFile("prompt.md");
    await expect(shared.writeScratchFile("../x", "x")).rejects.toThrow(InvalidInputError);
  });

  test("commands run as a non-root uid, on a read-only root, with no capability and no network", async () => {
    expect((await run(["id", "-u"])).stdout.trim()).toBe("10001");
    const status = (await run(["cat", "/proc/self/status"])).stdout;
    expect(status).toMatch(/^CapEff:\s+0+$/m);
    expect(status).toMatch(/^CapBnd:\s+0+$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(status).toMatch(/^Seccomp:\s+2$/m);
    const write = await run(["touch", "/etc/harness-was-here"]);
    expect(write.exitCode).not.toBe(0);
    expect(write.stderr).toMatch(/Read-only file system/);
    expect((await run(["sh", "-c", "touch $HOME/ok /tmp/ok && echo writable"])).stdout).toBe("writable\n");
    // Only a loopback device: nothing beyond the container can be reached.
    expect((await run(["ls", "/sys/class/net"])).stdout.trim()).toBe("lo");
  });

  test("snapshot commits the checkout on the run's branch with the checkout's hooks and filters off", async () => {
    const plant = [
      "printf '#!/bin/sh\\ntouch /harness/work/hooked\\nexit 1\\n' > .git/hooks/pre-commit",
      "chmod +x .git/hooks/pre-commit",
      "git config core.hooksPath .git/hooks",
      "git config filter.evil.clean 'touch /harness/work/filtered; cat'",
      "echo '*.txt filter=evil' > .gitattributes",
      "echo change > changed.txt",
    ].join(" && ");
    expect((await run(["sh", "-c", plant])).exitCode).toBe(0);
    const sha = await shared.snapshot("checkpoint one");
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    expect((await run(["git", "rev-parse", "harness/run"])).stdout.trim()).toBe(sha);
    expect((await run(["git", "log", "-1", "--format=%s"])).stdout.trim()).toBe("checkpoint one");
    expect((await run(["ls", "hooked", "filtered"])).exitCode).not.toBe(0);
    expect((await run(["git", "show", `${sha}:changed.txt`])).stdout).toBe("change\n");
    // Nothing changed since: the same commit.
    expect(await shared.snapshot()).toBe(sha);

    // The result leaves as a bundle through downloadToFile, as the write path takes it.
    const base = git(repo, "rev-parse", "HEAD");
    const bundled = await run(["git", "bundle", "create", "/tmp/result.bundle", "HEAD", `^${base}`]);
    expect(bundled.exitCode).toBe(0);
    const moved = await run(["sh", "-c", "cat /tmp/result.bundle > result.bundle"]);
    expect(moved.exitCode).toBe(0);
    const out = join(root.path, "result.bundle");
    expect(await shared.downloadToFile("result.bundle", out, 10 * 1024 * 1024)).toBeGreaterThan(0);
    expect(git(repo, "bundle", "list-heads", out)).toContain(sha);
  });

  test("pause freezes the sandbox, refuses commands clearly, and resume continues where it was", async () => {
    const box = await sandbox({ runId: "pause-run" });
    const counter = box.exec({
      argv: ["sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done"],
      cwd: box.workDir,
      timeout: 120_000,
    });
    const count = async (): Promise<number> =>
      Number((await box.exec({ argv: ["cat", "/tmp/count"], cwd: box.workDir, timeout: 10_000 })).stdout.trim() || 0);
    let before = 0;
    while (before < 5) before = await count();
    await box.pause();
    await expect(box.exec({ argv: ["true"], cwd: box.workDir, timeout: 5_000 })).rejects.toThrow(/paused: resume it/);
    // Two seconds frozen: a counter that kept running would be 40 further on.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await box.resume();
    const after = await count();
    expect(after).toBeGreaterThanOrEqual(before);
    expect(after - before).toBeLessThan(20);
    let later = after;
    while (later <= after) later = await count();
    expect(later).toBeGreaterThan(after);
    await box.teardown();
    expect((await counter).exitCode).not.toBe(0);
  }, 60_000);

  test("teardown removes the container and its volume, twice without error, and then refuses commands", async () => {
    if (!live) return;
    const box = await sandbox({ runId: "teardown-run" });
    const id = box.id;
    expect((await live.docker.getContainer(id).inspect()).State.Running).toBe(true);
    // A paused sandbox goes as well.
    await box.pause();
    await box.teardown();
    await box.teardown();
    await expect(live.docker.getContainer(id).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(box.exec({ argv: ["true"], cwd: box.workDir, timeout: 1_000 })).rejects.toThrow(/torn down/);
    const leftovers = (await readdir(tmpdir())).filter((name) => name.startsWith("harness-docker-teardown-run-"));
    expect(leftovers).toEqual([]);
  });

  test("the inventory lists a leftover with its run and repository, and removes it", async () => {
    if (!live) return;
    const box = await sandbox({ runId: "leftover-run" });
    const inventory = dockerInventory({ host: live.host });
    const record = (await inventory.list()).find((each) => each.runId === "leftover-run");
    expect(record).toMatchObject({ kind: "docker", id: box.id, repo });
    expect(Date.parse(record?.createdAt ?? "")).toBeGreaterThan(Date.now() - 600_000);
    if (!record) return;
    await inventory.remove(record);
    expect((await inventory.list()).some((each) => each.id === box.id)).toBe(false);
    await inventory.remove(record);
  });

  test("a retried run removes the container its dead attempt left", async () => {
    if (!live) return;
    const first = await sandbox({ runId: "retried-run" });
    const second = await sandbox({ runId: "retried-run", replaceEarlierAttempts: true });
    await expect(live.docker.getContainer(first.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect((await live.docker.getContainer(second.id).inspect()).State.Running).toBe(true);
  });

  test("a GitHub repository is cloned by the host with the token, and the container never sees it", async () => {
    const token = fakeToken("ghs_", 37);
    await makeBareRepo(root.path, "acme", "widgets");
    const server = await startGitHttpServer({ projectRoot: root.path, token });
    try {
      const box = await sandbox({
        runId: "remote-run",
        repo: "acme/widgets",
        githubToken: token,
        githubServerUrl: server.url,
        branch: "harness/remote",
      });
      expect(server.requests.some((request) => request.password === token)).toBe(true);
      const result = await box.exec({
        argv: ["sh", "-c", "git branch --show-current; cat README.md; git config --list --show-origin; env"],
        cwd: box.workDir,
        timeout: 20_000,
      });
      expect(result.stdout).toContain("harness/remote\n# test repo\n");
      expect(result.stdout).not.toContain(token);
      expect(result.stdout).not.toContain(Buffer.from(`x-access-token:${token}`).toString("base64"));
      const searched = await box.exec({
        argv: ["grep", "-rl", token, "/harness", "/home/harness", "/tmp"],
        cwd: box.workDir,
        timeout: 20_000,
      });
      expect(searched.stdout).toBe("");
      await box.teardown();
    } finally {
      await server.close();
    }
  });

  test("the run's image wins; one the engine lacks and cannot pull is one error saying what to do", async () => {
    if (!live) return;
    // The operator's image is there; the run's own is not, nor in any registry this engine reaches.
    const attempt = createDockerSandbox(
      {
        repo,
        branch: "harness/run",
        runId: "no-image-run",
        network: { mode: "none" },
        dockerImage: "harness-no-such-image:missing",
      },
      { image, host: live.host },
    );
    const error = await attempt.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(SandboxError);
    const message = (error as Error).message;
    expect(message).toMatch(/^The Docker image "harness-no-such-image:missing" is not on the Docker Engine at \S+, /);
    expect(message).toMatch(/, and it could not be pulled: \S/);
    expect(message).not.toContain("HTTP code");
    expect(message).toContain("Check the image's name and tag");
    expect(message).toContain("docker pull harness-no-such-image:missing");
    expect(message).toMatch(/or choose an image the engine has$/);
    const containers = await live.docker.listContainers({
      all: true,
      filters: { label: ["harness-run=no-image-run"] },
    });
    expect(containers).toEqual([]);
    const leftovers = (await readdir(tmpdir())).filter((name) => name.startsWith("harness-docker-no-image-run-"));
    expect(leftovers).toEqual([]);
  });
});

describe.skipIf(!live)("the Docker sandbox without a network, relaying the run's own sockets", () => {
  let nodeImage = "";
  let socketDir = "";
  let gateway: Server;
  beforeAll(async () => {
    if (!live) return;
    nodeImage = await testImage(live.docker, { node: true });
    // As the model gateway listens (gateway/listen.ts): a folder others may pass, a socket anyone may use.
    socketDir = join(root.path, "gateway");
    await mkdir(socketDir);
    await chmod(socketDir, 0o711);
    gateway = createServer((request, response) => {
      response.end(`gateway saw ${request.method ?? ""} ${request.url ?? ""}`);
    });
    await new Promise<void>((resolve) => gateway.listen(join(socketDir, "gateway.sock"), resolve));
    await chmod(join(socketDir, "gateway.sock"), 0o666);
  }, 300_000);
  afterAll(async () => {
    if (live) await new Promise((resolve) => gateway.close(resolve));
  });

  /** A node one-liner printing the status and body of a GET (through the proxy at `proxy`, if given). */
  const get = (url: string, proxy?: number): string => {
    const target = new URL(url);
    const request = proxy
      ? { host: "127.0.0.1", port: proxy, path: url }
      : { host: target.hostname, port: Number(target.port), path: target.pathname };
    return (
      `require("http").get({ ...${JSON.stringify(request)}, headers: { host: ${JSON.stringify(target.host)} } }, ` +
      `(res) => { let body = ""; res.on("data", (c) => { body += c; }); ` +
      `res.on("end", () => console.log(res.statusCode, body.trim())); })` +
      `.on("error", (e) => console.log("error", e.message))`
    );
  };

  test("reaches the model gateway at 127.0.0.1:3129 through its Unix socket, and nothing else", async () => {
    const box = await sandbox(
      {
        runId: "relay-run",
        network: { mode: "none" },
        modelGateway: { url: "http://203.0.113.1:3000", socketPath: join(socketDir, "gateway.sock") },
      },
      { image: nodeImage, nodePath: "/usr/bin/node" },
    );
    expect(box.modelGatewayUrl).toBe("http://127.0.0.1:3129");
    const through = await box.exec({
      argv: ["node", "-e", get("http://127.0.0.1:3129/v1/messages")],
      cwd: box.workDir,
      timeout: 20_000,
    });
    expect(through.stdout.trim()).toBe("200 gateway saw GET /v1/messages");
    const elsewhere = await box.exec({
      argv: ["node", "-e", get("http://203.0.113.1:3000/")],
      cwd: box.workDir,
      timeout: 20_000,
    });
    expect(elsewhere.stdout).toMatch(/^error /);
    // The socket's folder is bound read-only: nothing can be left beside the socket.
    const write = await box.exec({ argv: ["touch", "/harness-relay/gateway/x"], cwd: box.workDir, timeout: 5_000 });
    expect(write.exitCode).not.toBe(0);
    await box.teardown();
  }, 120_000);

  test("an allowlist goes out only through the egress proxy, which refuses what the list does not name", async () => {
    const box = await sandbox(
      {
        runId: "allowlist-run",
        network: { mode: "allowlist", allow: { operator: [], repository: ["registry.npmjs.org"] } },
      },
      { image: nodeImage, nodePath: "/usr/bin/node" },
    );
    const env = await box.exec({ argv: ["sh", "-c", 'printf %s "$HTTP_PROXY"'], cwd: box.workDir, timeout: 5_000 });
    expect(env.stdout).toBe("http://127.0.0.1:3128");
    const refused = await box.exec({
      argv: ["node", "-e", get("http://example.invalid:8080/", 3128)],
      cwd: box.workDir,
      timeout: 20_000,
    });
    expect(refused.stdout).toMatch(/^403 Harness egress policy: example\.invalid:8080 is not allowed for this run/);
    expect((await box.exec({ argv: ["ls", "/sys/class/net"], cwd: box.workDir, timeout: 5_000 })).stdout.trim()).toBe(
      "lo",
    );
    await box.teardown();
  }, 120_000);

  test("an image without node at nodePath says so instead of running without its relay", async () => {
    await expect(
      sandbox(
        {
          runId: "no-node-run",
          modelGateway: { url: "http://203.0.113.1:3000", socketPath: join(socketDir, "gateway.sock") },
        },
        { nodePath: "/usr/bin/node" },
      ),
    ).rejects.toThrow(/needs node at \/usr\/bin\/node/);
  }, 60_000);
});
