import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, constants as fsConstants, existsSync } from "node:fs";
import {
  chmod,
  copyFile,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  realpath,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Docker from "dockerode";
import { tarArchive } from "../../src/sandbox/docker/tar.js";
import { runProcess } from "../../src/sandbox/process.js";

/**
 * A Docker Engine for the Docker sandbox's contract tests: the one already running (DOCKER_HOST,
 * else /var/run/docker.sock), or, when there is none and this machine has `dockerd` and root, a
 * daemon of the test's own (vfs storage, no iptables, no bridge) with its data, sockets and pid
 * file in a temp folder, stopped again by `stop()`. When neither works the answer is the reason,
 * for the test to print as it skips.
 */
export type TestEngine =
  | { available: true; docker: Docker; host: string; started: boolean; stop(): Promise<void> }
  | { available: false; reason: string };

const DEFAULT_SOCKET = "/var/run/docker.sock";
/** How long a daemon of our own may take to answer /_ping (vfs on a slow disk is not quick). */
const START_DEADLINE_MS = 60_000;
const POLL_MS = 100;

export async function testEngine(): Promise<TestEngine> {
  // The suite's own engine, started once for every file by the global set-up (prerequisites.ts).
  const shared = process.env["HARNESS_TEST_DOCKER_HOST"];
  if (shared) {
    const docker = clientFor(shared);
    if (await pings(docker)) return running(docker, shared);
    return { available: false, reason: `the suite's Docker Engine at ${shared} does not answer /_ping` };
  }
  const unavailable = process.env["HARNESS_TEST_DOCKER_UNAVAILABLE"];
  if (unavailable) return { available: false, reason: unavailable };
  const configured = process.env["DOCKER_HOST"];
  if (configured) {
    const docker = clientFor(configured);
    if (await pings(docker)) return running(docker, configured);
    return { available: false, reason: `DOCKER_HOST=${configured} does not answer /_ping` };
  }
  if (existsSync(DEFAULT_SOCKET)) {
    const docker = new Docker({ socketPath: DEFAULT_SOCKET });
    if (await pings(docker)) return running(docker, `unix://${DEFAULT_SOCKET}`);
  }
  const dockerd = findOnPath("dockerd", ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin"]);
  if (!dockerd)
    return {
      available: false,
      reason: "no Docker Engine is running and dockerd is not installed (apt-get install docker.io)",
    };
  if (process.getuid?.() !== 0)
    return { available: false, reason: "no Docker Engine is running, and starting dockerd takes root" };
  return startOwnDaemon(dockerd);
}

function running(docker: Docker, host: string): TestEngine {
  return { available: true, docker, host, started: false, stop: () => Promise.resolve() };
}

function clientFor(host: string): Docker {
  if (host.startsWith("unix://")) return new Docker({ socketPath: host.slice("unix://".length) });
  const url = new URL(host.replace(/^tcp:/, "http:"));
  return new Docker({ host: url.hostname, port: Number(url.port || 2375), protocol: "http" });
}

async function pings(docker: Docker): Promise<boolean> {
  try {
    await Promise.race([
      docker.ping(),
      new Promise((_, reject) =>
        setTimeout(() => {
          reject(new Error("no answer"));
        }, 2_000).unref(),
      ),
    ]);
    return true;
  } catch {
    return false;
  }
}

async function startOwnDaemon(dockerd: string): Promise<TestEngine> {
  const base = await mkdtemp(join(tmpdir(), "harness-test-dockerd-"));
  const socketPath = join(base, "docker.sock");
  const logPath = join(base, "dockerd.log");
  const log = await import("node:fs").then((fs) => fs.openSync(logPath, "a"));
  const child: ChildProcess = spawn(
    dockerd,
    [
      "--storage-driver=vfs",
      "--iptables=false",
      "--ip6tables=false",
      "--bridge=none",
      `--data-root=${join(base, "data")}`,
      `--exec-root=${join(base, "exec")}`,
      `--pidfile=${join(base, "dockerd.pid")}`,
      `--host=unix://${socketPath}`,
      // Its own containerd, not a system one another daemon may own.
      `--containerd-namespace=harness-test`,
    ],
    { stdio: ["ignore", log, log], env: { PATH: process.env["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin" } },
  );
  let exited: string | undefined;
  const gone = new Promise<void>((resolve) => {
    child.on("exit", (code, signal) => {
      exited = `dockerd exited (${signal ?? String(code)})`;
      resolve();
    });
    child.on("error", (error) => {
      exited = `dockerd could not start: ${error.message}`;
      resolve();
    });
  });
  const stop = async (): Promise<void> => {
    if (exited === undefined) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await gone;
      clearTimeout(killer);
    }
    await rm(base, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  };
  const docker = new Docker({ socketPath });
  const deadline = Date.now() + START_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (exited !== undefined) break;
    if (existsSync(socketPath) && (await pings(docker)))
      return { available: true, docker, host: `unix://${socketPath}`, started: true, stop };
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  const tail = (await readFile(logPath, "utf8").catch(() => "")).trim().split("\n").slice(-3).join(" | ");
  await stop();
  return {
    available: false,
    reason: `${exited ?? `dockerd did not answer /_ping within ${String(START_DEADLINE_MS / 1000)} s`}: ${tail}`,
  };
}

function findOnPath(name: string, extra: string[]): string | undefined {
  const dirs = [...(process.env["PATH"] ?? "").split(":"), ...extra].filter((dir) => dir.startsWith("/"));
  for (const dir of dirs) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * Programs the test image holds: a shell, git, and the coreutils the sandbox's own commands and
 * the tests use. Taken from this machine with their shared libraries, so no registry is needed.
 */
const IMAGE_PROGRAMS = [
  "sh",
  "git",
  "cat",
  "head",
  "realpath",
  "stat",
  "sleep",
  "id",
  "ls",
  "mkdir",
  "rm",
  "mv",
  "dirname",
  "env",
  "echo",
  "printf",
  "seq",
  "wc",
  "touch",
  "chmod",
  "grep",
  "tr",
  "true",
  "false",
  "ln",
  // For the isolation suites' attacks and probes: a detached child, a heartbeat, a comparison.
  "setsid",
  "date",
  "cmp",
];
const IMAGE_REPOSITORY = "harness-sandbox-test";
/** Bump to rebuild every cached image after changing how it is assembled. */
const IMAGE_RECIPE = "5";

/**
 * A small image built on this engine from this machine's own programs (`docker import` of a
 * root filesystem assembled in a temp folder: tens of MB, since vfs copies it for each
 * container), tagged by a hash of what went in so it is built once per engine and content.
 */
export async function testImage(docker: Docker, options: { node?: boolean } = {}): Promise<string> {
  const files = new Map<string, true>();
  // Node (about 100 MB) only for the tests of the relay that runs on it.
  for (const program of [...IMAGE_PROGRAMS, ...(options.node ? ["node"] : [])]) {
    const path = findOnPath(program, ["/usr/bin", "/bin"]);
    if (!path) throw new Error(`The Docker test image needs ${program}, which is not on this machine`);
    await collect(path, files);
  }
  const gitCore = "/usr/lib/git-core";
  const hash = createHash("sha256").update(`${IMAGE_RECIPE}${options.node ? "+node" : ""}`);
  for (const path of [...files.keys()].sort()) {
    const info = await lstat(path);
    hash.update(`${path}\0${String(info.size)}\0${String(info.mtimeMs)}\0`);
  }
  const tag = hash.digest("hex").slice(0, 16);
  const name = `${IMAGE_REPOSITORY}${options.node ? "-node" : ""}:${tag}`;
  try {
    await docker.getImage(name).inspect();
    return name;
  } catch {
    // Not built yet on this engine.
  }

  const root = await mkdtemp(join(tmpdir(), "harness-test-rootfs-"));
  try {
    // The image's / is this folder: mkdtemp's 0700 would shut the container's user out of everything.
    await chmod(root, 0o755);
    for (const dir of ["/bin", "/sbin", "/lib", "/lib64"]) {
      const info = await lstat(dir).catch(() => undefined);
      if (info?.isSymbolicLink()) await symlink(await readlink(dir), join(root, dir));
    }
    for (const path of files.keys()) await place(root, path);
    // git finds its helpers here; every builtin runs from the one binary.
    await mkdir(join(root, gitCore), { recursive: true });
    await symlink("../../bin/git", join(root, gitCore, "git"));
    for (const dir of ["home", "etc", "proc", "dev", "sys"]) await mkdir(join(root, dir), { recursive: true });
    await mkdir(join(root, "tmp"), { mode: 0o1777 });
    await chmod(join(root, "tmp"), 0o1777);
    await writeFile(
      join(root, "etc/passwd"),
      "root:x:0:0:root:/root:/bin/sh\nharness:x:10001:10001:harness:/home/harness:/bin/sh\n",
    );
    await writeFile(join(root, "etc/group"), "root:x:0:\nharness:x:10001:\n");
    const tar = spawn("tar", ["--create", "--file=-", "--numeric-owner", "--owner=0", "--group=0", "-C", root, "."], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const progress = await docker.importImage(tar.stdout, {
      repo: `${IMAGE_REPOSITORY}${options.node ? "-node" : ""}`,
      tag,
      changes: ["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    });
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(progress, (error: Error | null) => {
        if (error) reject(error);
        else resolve();
      });
    });
    await docker.getImage(name).inspect();
    return name;
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/**
 * `base` with small files added (paths relative to `/`, in folders the image has), as an image
 * of its own: a container of `base` that never runs is given the files and committed. A second
 * image, told apart by its files, without a build or a registry; tagged by a hash of what went
 * in, so it is made once per engine.
 */
export async function imageWithFiles(
  docker: Docker,
  base: string,
  repository: string,
  files: Record<string, string>,
): Promise<string> {
  const tag = createHash("sha256")
    .update(JSON.stringify([base, Object.entries(files).sort()]))
    .digest("hex")
    .slice(0, 16);
  const name = `${repository}:${tag}`;
  try {
    await docker.getImage(name).inspect();
    return name;
  } catch {
    // Not made yet on this engine.
  }
  const container = await docker.createContainer({ Image: base, Cmd: ["true"], Labels: { "harness-test": "image" } });
  try {
    await container.putArchive(
      tarArchive(
        Object.entries(files).map(([path, content]) => ({
          name: path,
          type: "file" as const,
          mode: 0o644,
          uid: 0,
          gid: 0,
          content: Buffer.from(content, "utf8"),
        })),
      ),
      { path: "/" },
    );
    await container.commit({ repo: repository, tag });
  } finally {
    await container.remove({ force: true });
  }
  return name;
}

/** A program's real file, the links leading to it, and every shared library it loads. */
async function collect(path: string, files: Map<string, true>): Promise<void> {
  files.set(path, true);
  const real = await realpath(path);
  files.set(real, true);
  const ldd = await runProcess({ argv: ["ldd", real], cwd: "/", env: { PATH: "/usr/bin:/bin" }, timeout: 10_000 });
  for (const match of ldd.stdout.matchAll(/(\/\S+) \(0x/g)) {
    const library = match[1];
    if (library === undefined) continue;
    files.set(library, true);
    files.set(await realpath(library), true);
  }
}

/** Copies `path` into the root at the same place: a symlink as a symlink, a file as a file. */
async function place(root: string, path: string): Promise<void> {
  // Through the root's own top-level links (bin → usr/bin), as the host resolves them.
  const parent = await realpath(dirname(path));
  const target = join(root, parent, path.slice(path.lastIndexOf("/") + 1));
  await mkdir(dirname(target), { recursive: true });
  if (existsSync(target)) return;
  const info = await lstat(path);
  if (info.isSymbolicLink()) await symlink(await readlink(path), target);
  else await copyFile(path, target);
}
