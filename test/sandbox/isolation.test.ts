import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { homedir, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { ExecResult } from "../../src/contracts/types.js";
import {
  isolatedCommand,
  probeIsolation,
  SANDBOX_UID,
  type IsolationSpec,
  type NetworkMode,
} from "../../src/sandbox/local/isolation.js";
import { giveToSandbox, letSandboxTraverse } from "../../src/sandbox/local/sandbox-access.js";
import { sandboxUserFor } from "../../src/sandbox/local/sandbox-user.js";
import { runProcess } from "../../src/sandbox/process.js";
import { InvalidInputError } from "../../src/util/errors.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";

/*
 * Every test here is an attack by the sandboxed command, run for real through bwrap and
 * runProcess, and asserts the safe outcome on the host. Where the safe outcome could also come
 * from the attack being broken (a file that was never there, a process that never ran), a
 * control runs the same attack without the protection and shows that it does succeed.
 */

const probe = await probeIsolation();
if (!probe.available)
  console.warn(`[isolation.test] real-process isolation tests skipped: ${probe.reason}; fix: ${probe.fix}`);
const noBwrap = !probe.available;
const bwrapPath = probe.available ? probe.bwrapPath : "/usr/bin/bwrap";

// node outside /usr (nvm, a tarball in /opt) must be made visible for the tests that use it.
const nodeDir = dirname(process.execPath);
const nodeReadOnly = nodeDir.startsWith("/usr/") ? [] : [nodeDir];

/** What the tests below allow in the sandbox's /etc: widening it should be a deliberate change. */
const ALLOWED_ETC = new Set([
  "resolv.conf",
  "hosts",
  "host.conf",
  "nsswitch.conf",
  "gai.conf",
  "services",
  "protocols",
  "passwd",
  "group",
  "ssl",
  "ca-certificates",
  "alternatives",
  "localtime",
  "timezone",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
]);

let base: string;
let workDir: string;
let homeDir: string;
const cleanups: Array<() => Promise<void> | void> = [];

/** Who isolated commands run as on the host: the sandbox user when these tests run as root. */
const sandboxUser = sandboxUserFor();

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "harness-isolation-test-"));
  workDir = join(base, "work");
  homeDir = join(base, "home");
  await mkdir(workDir);
  await mkdir(homeDir);
  // As the local sandbox prepares its folders.
  await letSandboxTraverse(base, sandboxUser);
  await giveToSandbox(workDir, sandboxUser);
  await giveToSandbox(homeDir, sandboxUser);
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await rm(base, { recursive: true, force: true });
});

function spec(network: NetworkMode = "none"): IsolationSpec {
  return { workDir, homeDir, network, readOnlyPaths: nodeReadOnly };
}

function sandboxEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: homeDir, ...extra };
}

/** `sh -c script sh ...args` inside the sandbox: paths travel as arguments, never spliced into the script. */
function runIsolated(
  script: string,
  args: readonly string[] = [],
  opts: { network?: NetworkMode; env?: Record<string, string>; timeout?: number } = {},
): Promise<ExecResult> {
  return runProcess({
    ...isolatedCommand(spec(opts.network), ["sh", "-c", script, "sh", ...args], { bwrapPath }),
    cwd: workDir,
    env: sandboxEnv(opts.env),
    timeout: opts.timeout ?? 15_000,
  });
}

async function readOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch {
    return undefined;
  }
}

/** Polls until the file's content has changed at least twice, i.e. something is alive and writing it. */
async function waitUntilBeating(path: string, withinMs = 10_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  const seen = new Set<string>();
  while (Date.now() < deadline) {
    const value = await readOrUndefined(path);
    if (value) seen.add(value);
    if (seen.size >= 3) return;
    await sleep(25);
  }
  throw new Error(`${path} never started beating`);
}

/**
 * Whether the heartbeat file goes quiet: true once its content has not changed for `quietMs`
 * (ten beats of a 100 ms loop), false if it keeps changing for `withinMs` plus that.
 */
async function stopsBeating(path: string, quietMs = 1_000, withinMs = 3_000): Promise<boolean> {
  const start = Date.now();
  let last = await readOrUndefined(path);
  let lastChange = Date.now();
  for (;;) {
    await sleep(25);
    const value = await readOrUndefined(path);
    if (value !== last) {
      last = value;
      lastChange = Date.now();
    }
    if (Date.now() - lastChange >= quietMs) return true;
    if (Date.now() - start >= withinMs + quietMs) return false;
  }
}

/** Kills a host process and, first, its children (a sandbox's init without --die-with-parent outlives bwrap). */
function killHostTree(pid: number): void {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    for (const child of children) killHostTree(child);
  } catch {
    // Already gone.
  }
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/**
 * A heartbeat every 100 ms into "$1/<name>", writing its own pid to "$1/<name>.pid" first.
 * Bounded to ~20 s so a test that fails half-way cannot leave it running for ever.
 */
const HEARTBEAT_LOOP =
  'echo $$ > "$1/$2.pid"; i=0; while [ $i -lt 200 ]; do date +%s%N > "$1/$2"; sleep 0.1; i=$((i+1)); done';

/**
 * Starts a heartbeat loop that escapes the command twice over (a subshell that exits at once,
 * then setsid: another session and process group, reparented away from the command), waits
 * until it beats, and returns: the command itself is done, the orphan is meant to live on.
 */
const ORPHAN_SCRIPT = `
( setsid sh -c '${HEARTBEAT_LOOP}' sh "$1" orphan </dev/null >/dev/null 2>&1 & )
i=0; first=
while [ $i -lt 200 ]; do
  v=$(cat "$1/orphan" 2>/dev/null)
  if [ -n "$v" ]; then
    if [ -z "$first" ]; then first=$v; elif [ "$v" != "$first" ]; then echo beating; exit 0; fi
  fi
  sleep 0.05; i=$((i+1))
done
echo "the orphan never beat"; exit 3
`;

describe("isolatedCommand", () => {
  const plain: IsolationSpec = { workDir: "/tmp/run-1/work", homeDir: "/tmp/run-1/home", network: "none" };

  test("is bwrap's options, then --, then the command unchanged", () => {
    const { argv } = isolatedCommand(plain, ["sh", "-c", "echo $HOME; --not-an-option"], { bwrapPath: "/opt/bwrap" });
    expect(argv[0]).toBe("/opt/bwrap");
    const separator = argv.indexOf("--");
    expect(argv.slice(separator + 1)).toEqual(["sh", "-c", "echo $HOME; --not-an-option"]);
    for (const option of [
      "--unshare-all",
      "--unshare-user",
      "--die-with-parent",
      "--new-session",
      "--disable-userns",
      "--cap-drop",
    ]) {
      expect(argv.slice(0, separator)).toContain(option);
    }
    expect(argv).not.toContain("--setenv");
  });

  test("shares the host network only when asked to", () => {
    expect(isolatedCommand(plain, ["true"]).argv).not.toContain("--share-net");
    expect(isolatedCommand({ ...plain, network: "open" }, ["true"]).argv).toContain("--share-net");
  });

  test("refuses paths that would expose too much, and a bwrap that a run's PATH could choose", () => {
    expect(() => isolatedCommand({ ...plain, workDir: "work" }, ["true"])).toThrow(InvalidInputError);
    expect(() => isolatedCommand({ ...plain, homeDir: "/" }, ["true"])).toThrow(InvalidInputError);
    expect(() => isolatedCommand({ ...plain, workDir: "/tmp/run-1/../.." }, ["true"])).toThrow(InvalidInputError);
    expect(() => isolatedCommand({ ...plain, readOnlyPaths: ["relative/bin"] }, ["true"])).toThrow(InvalidInputError);
    // An ancestor of the checkout would show every other run's checkout beside it.
    expect(() => isolatedCommand({ ...plain, readOnlyPaths: ["/tmp"] }, ["true"])).toThrow(/contains the workDir/);
    expect(() => isolatedCommand(plain, ["true"], { bwrapPath: "bwrap" })).toThrow(InvalidInputError);
    expect(() => isolatedCommand(plain, [])).toThrow(InvalidInputError);
  });
});

describe("probeIsolation", () => {
  test.skipIf(noBwrap)("finds bwrap working on this host, and caches the answer", async () => {
    const result = await probeIsolation();
    expect(result).toMatchObject({ available: true, bwrapPath: expect.stringMatching(/^\/.*bwrap$/) as unknown });
    if (result.available) expect(result.version).toMatch(/^\d+\.\d+/);
    expect(await probeIsolation()).toBe(result);
  });

  test("a bwrap that does not exist: unavailable, with the install command", async () => {
    const result = await probeIsolation({ bwrapPath: join(tmpdir(), "harness-no-such-dir", "bwrap") });
    expect(result).toEqual({
      available: false,
      reason: expect.stringContaining("bwrap not found") as unknown,
      fix: expect.stringContaining("apt-get install bubblewrap") as unknown,
    });
  });

  test("a kernel that refuses namespaces: unavailable, with bwrap's words and the sysctl to change", async () => {
    const fake = join(base, "bwrap-refused");
    await writeFile(
      fake,
      '#!/bin/sh\necho "bwrap: No permissions to creating new namespace, ' +
        'likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n',
    );
    await chmod(fake, 0o755);
    const result = await probeIsolation({ bwrapPath: fake });
    expect(result.available).toBe(false);
    if (result.available) return;
    expect(result.reason).toContain("No permissions to creating new namespace");
    expect(result.fix).toMatch(/user namespaces/);
    expect(result.fix).toMatch(/sysctl /);
  });

  test("a bwrap too old for the options used: unavailable, with the version to upgrade to", async () => {
    const fake = join(base, "bwrap-old");
    await writeFile(fake, '#!/bin/sh\necho "bwrap: Unknown option --disable-userns" >&2\nexit 1\n');
    await chmod(fake, 0o755);
    const result = await probeIsolation({ bwrapPath: fake });
    expect(result).toMatchObject({
      available: false,
      reason: expect.stringContaining("Unknown option --disable-userns") as unknown,
      fix: expect.stringContaining("0.8.0") as unknown,
    });
  });
});

describe.skipIf(noBwrap)("an isolated command (real bwrap processes)", () => {
  test("cannot read another process's environment through /proc: it has its own PID namespace", async () => {
    const hostSecret = fakeToken("ghs_");
    const parentSecret = fakeToken("sk-ant-api03-", 64, "url-safe");
    // A host process whose initial environment holds a secret, as the harness's own does.
    const helper = spawn("sleep", ["30"], {
      env: { PATH: "/usr/bin:/bin", GITHUB_TOKEN: hostSecret },
      stdio: "ignore",
    });
    cleanups.push(() => {
      helper.kill("SIGKILL");
    });
    const helperPid = helper.pid!;
    process.env["HARNESS_TEST_PARENT_SECRET"] = parentSecret;
    cleanups.push(() => {
      delete process.env["HARNESS_TEST_PARENT_SECRET"];
    });
    // Control: from the host, /proc hands the secret to anyone allowed to read it.
    await expect.poll(() => readOrUndefined(`/proc/${helperPid}/environ`)).toContain(hostSecret);

    const dump = await runIsolated(
      'cat "/proc/$1/environ" "/proc/$2/environ" /proc/1/environ; for f in /proc/[0-9]*/environ; ' +
        'do cat "$f"; done; kill -KILL "$1"',
      [String(helperPid), String(process.pid)],
    );
    expect(dump.stdout + dump.stderr).not.toContain(hostSecret);
    expect(dump.stdout + dump.stderr).not.toContain(parentSecret);
    // Nor can it signal host processes: the pid means nothing in its namespace.
    // (A killed helper, even one not yet reaped, would have no environment left to read.)
    expect(await readOrUndefined(`/proc/${helperPid}/environ`)).toContain(hostSecret);

    const listing = await runProcess({
      ...isolatedCommand(spec(), ["ls", "/proc"], { bwrapPath }),
      cwd: workDir,
      env: sandboxEnv(),
      timeout: 15_000,
    });
    expect(listing.exitCode).toBe(0);
    const pids = listing.stdout
      .split("\n")
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number);
    // bwrap's init (1) and ls (2): nothing from the host.
    expect(pids.length).toBeGreaterThan(0);
    expect(pids.length).toBeLessThanOrEqual(3);
    expect(pids).not.toContain(helperPid);
    const init = await runIsolated("tr '\\0' ' ' < /proc/1/cmdline");
    expect(init.stdout).toMatch(/bwrap/);
  });

  test(
    "cannot see another run's checkout, the app's .env, " + "the host's HOME, the harness's directory or host /etc",
    async () => {
      const sibling = await mkdtemp(join(tmpdir(), "harness-isolation-sibling-"));
      cleanups.push(() => rm(sibling, { recursive: true, force: true }));
      const secret = fakeToken("ghp_");
      await writeFile(join(sibling, ".env"), `GITHUB_TOKEN=${secret}\nGITHUB_PRIVATE_KEY="${fakePem()}"\n`);
      expect(await readFile(join(sibling, ".env"), "utf8")).toContain(secret); // control: it is there on the host

      const paths = [
        join(sibling, ".env"),
        sibling,
        homedir(),
        process.cwd(),
        join(process.cwd(), "package.json"),
        "/etc/shadow",
        "/etc/gitconfig",
        "/root",
        "/home",
        "/var",
        "/run",
        "/sys",
        "/srv",
      ];
      const result = await runIsolated(
        'for p in "$@"; do if [ -e "$p" ]; then echo "visible: $p"; cat "$p" 2>/dev/null; fi; done; true',
        paths,
      );
      expect(result.exitCode).toBe(0);
      expect(result.stdout).not.toContain("visible:");
      expect(result.stdout).not.toContain(secret);

      // /tmp is a fresh tmpfs holding only the path down to this run's own directories.
      const tmp = await runIsolated('ls -A "$1"', [dirname(base)]);
      expect(tmp.stdout.trim().split("\n")).toEqual([basename(base)]);
      const etc = await runIsolated("ls -A /etc");
      expect(etc.exitCode).toBe(0);
      for (const entry of etc.stdout.trim().split("\n")) expect(ALLOWED_ETC).toContain(entry);
    },
  );

  test("cannot write outside workDir and homeDir: nothing reaches the host", async () => {
    const sibling = await mkdtemp(join(tmpdir(), "harness-isolation-sibling-"));
    cleanups.push(() => rm(sibling, { recursive: true, force: true }));
    const tag = fakeToken("pwned-", 12);
    const readOnlyTargets = [`/usr/local/bin/${tag}`, `/usr/bin/${tag}`, `/etc/${tag}`, `/${tag}`];
    // These exist on the host, but inside they are only the sandbox's throwaway /tmp.
    const hostTargets = [join(sibling, tag), join(tmpdir(), tag), join(base, tag)];
    cleanups.push(() =>
      Promise.all([...readOnlyTargets, ...hostTargets].map((path) => rm(path, { force: true }))).then(() => undefined),
    );

    const result = await runIsolated(
      'for p in "$@"; do mkdir -p "${p%/*}" 2>/dev/null; if echo pwned > "$p"; then echo "wrote: $p"; fi; done; true',
      [...readOnlyTargets, ...hostTargets],
    );
    for (const path of readOnlyTargets) expect(result.stdout).not.toContain(`wrote: ${path}`);
    expect(result.stderr).toMatch(/Read-only file system/);
    for (const path of [...readOnlyTargets, ...hostTargets]) expect(existsSync(path), path).toBe(false);
  });

  test(
    "writes in workDir and homeDir land on the host, " +
      "as an unprivileged uid whose files the host can read and remove",
    async () => {
      const result = await runIsolated(
        'id -u; id -g; echo hello > "$1/from-sandbox.txt" && mkdir -p "$1/deep/er" && echo x > "$1/deep/er/f" ' +
          '&& chmod 500 "$1/deep/er" && chmod 700 "$1/deep" && echo config > "$2/.toolrc"',
        [workDir, homeDir],
      );
      expect(result.exitCode).toBe(0);
      expect(result.stdout.trim().split("\n")).toEqual([String(SANDBOX_UID), String(SANDBOX_UID)]);
      expect(SANDBOX_UID).not.toBe(0);

      expect(await readFile(join(workDir, "from-sandbox.txt"), "utf8")).toBe("hello\n");
      expect(await readFile(join(homeDir, ".toolrc"), "utf8")).toBe("config\n");
      // uid 1000 inside is, outside, the sandbox user when the harness is root, else the harness itself.
      const owner = (await stat(join(workDir, "from-sandbox.txt"))).uid;
      expect(owner).toBe(sandboxUser?.uid ?? process.getuid?.());
      expect(owner).not.toBe(0);
      await chmod(join(workDir, "deep", "er"), 0o700);
      await rm(join(workDir, "deep"), { recursive: true });
      await rm(join(workDir, "from-sandbox.txt"));
      expect(existsSync(join(workDir, "deep"))).toBe(false);
    },
  );

  test(
    "a real toolchain works: git commits in the checkout " + "(no dubious-ownership refusal), names resolve",
    async () => {
      const result = await runIsolated(
        "git init -q . && git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m from-sandbox && " +
          "git log --format=%s && getent hosts localhost >/dev/null && echo resolved",
        [],
        { env: { GIT_CONFIG_NOSYSTEM: "1" } },
      );
      expect(result.stderr).toBe("");
      expect(result.stdout.trim().split("\n")).toEqual(["from-sandbox", "resolved"]);
    },
  );

  test("holds no capabilities, cannot gain new privileges, cannot make a user namespace to get them back", async () => {
    const result = await runIsolated(
      "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; " +
        "if unshare --user --map-root-user true 2>/dev/null; then echo unshared; fi",
    );
    const fields = Object.fromEntries(
      result.stdout
        .trim()
        .split("\n")
        .map((line) => line.split(/:\s+/) as [string, string]),
    );
    expect(fields).toEqual({
      CapInh: "0000000000000000",
      CapPrm: "0000000000000000",
      CapEff: "0000000000000000",
      CapBnd: "0000000000000000",
      CapAmb: "0000000000000000",
      NoNewPrivs: "1",
    });
    expect(result.stdout).not.toContain("unshared");
  });

  test(
    "runs in a session of its own, " + "so it has no controlling terminal of the caller's to push keystrokes into",
    async () => {
      const command = isolatedCommand(spec(), ["true"], { bwrapPath });
      const sessionOf = async (argv: string[]): Promise<string> => {
        const result = await runProcess({
          ...command,
          argv: [...argv, "sh", "-c", "cut -d' ' -f6 /proc/self/stat"],
          cwd: workDir,
          env: sandboxEnv(),
          timeout: 15_000,
        });
        expect(result.exitCode).toBe(0);
        return result.stdout.trim();
      };
      const withoutCommand = command.argv.slice(0, -1);
      // A session id of 0 means the session leader is outside the sandbox's PID namespace: the
      // caller's session (and terminal, if it had one). --new-session makes it a sandbox process.
      expect(await sessionOf(withoutCommand)).not.toBe("0");
      expect(await sessionOf(withoutCommand.filter((arg) => arg !== "--new-session"))).toBe("0"); // control
    },
  );

  test("passes the spawn environment to the command, and none of its values ever appears in the argv", async () => {
    const env = { GITHUB_TOKEN: fakeToken("ghs_"), ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 64, "url-safe") };
    const command = isolatedCommand(spec(), ["sh", "-c", 'printf "%s\\n%s\\n" "$GITHUB_TOKEN" "$ANTHROPIC_API_KEY"'], {
      bwrapPath,
    });
    for (const value of Object.values(env)) expect(command.argv.join("\0")).not.toContain(value);
    const result = await runProcess({ ...command, cwd: workDir, env: sandboxEnv(env), timeout: 15_000 });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe(`${env.GITHUB_TOKEN}\n${env.ANTHROPIC_API_KEY}\n`);
  });

  test('network "none" cannot reach a server on the host\'s 127.0.0.1; "open" can', async () => {
    let connections = 0;
    const server = createServer((socket) => {
      connections += 1;
      socket.end("hello\n");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) =>
          server.close(() => {
            resolve();
          }),
        ),
    );
    const { port } = server.address() as AddressInfo;
    const connect = [
      process.execPath,
      "-e",
      'const s = require("node:net").connect(Number(process.argv[1]), "127.0.0.1");' +
        's.on("data", (d) => { process.stdout.write("got: " + String(d)); process.exit(0); });' +
        's.on("error", (e) => { process.stdout.write("error: " + e.code); process.exit(3); });' +
        'setTimeout(() => { process.stdout.write("timeout"); process.exit(4); }, 5000);',
      String(port),
    ];
    const attempt = (network: NetworkMode): Promise<ExecResult> =>
      runProcess({
        ...isolatedCommand(spec(network), connect, { bwrapPath }),
        cwd: workDir,
        env: sandboxEnv(),
        timeout: 15_000,
      });

    const closed = await attempt("none");
    expect(closed.stdout).toMatch(/^error: (ECONNREFUSED|ENETUNREACH|EHOSTUNREACH)$/);
    expect(connections).toBe(0);

    const open = await attempt("open");
    expect(open.stdout).toBe("got: hello\n");
    expect(connections).toBe(1);
  });

  test("a setsid, double-forked child does not outlive the command", async () => {
    const result = await runIsolated(ORPHAN_SCRIPT, [workDir]);
    expect(result.stdout.trim()).toBe("beating");
    expect(await stopsBeating(join(workDir, "orphan"))).toBe(true);
  });

  test("control: without isolation the same orphan survives runProcess (so the test above can fail)", async () => {
    const orphanPid = async (): Promise<number> => Number(await readFile(join(workDir, "orphan.pid"), "utf8"));
    cleanups.push(async () => {
      killHostTree(await orphanPid());
    });
    const result = await runProcess({
      argv: ["sh", "-c", ORPHAN_SCRIPT, "sh", workDir],
      cwd: workDir,
      env: sandboxEnv(),
      timeout: 15_000,
    });
    expect(result.stdout.trim()).toBe("beating");
    expect(await stopsBeating(join(workDir, "orphan"))).toBe(false);
  });

  test("a timeout ends the whole sandbox, orphans included, although they are in another session", async () => {
    const script =
      `( setsid sh -c '${HEARTBEAT_LOOP}' sh "$1" orphan </dev/null >/dev/null 2>&1 & ); ` +
      `sh -c '${HEARTBEAT_LOOP}' sh "$1" main`;
    const running = runIsolated(script, [workDir], { timeout: 3_000 });
    await waitUntilBeating(join(workDir, "main"));
    await waitUntilBeating(join(workDir, "orphan"));
    const result = await running;
    expect(result.timedOut).toBe(true);
    expect(await stopsBeating(join(workDir, "main"))).toBe(true);
    expect(await stopsBeating(join(workDir, "orphan"))).toBe(true);
  });

  // The harness itself dies (SIGKILL, OOM): no process group kill happens, only the kernel's
  // parent-death signal. bwrap is started in its own session here so that runProcess's group
  // kill of the (killed) wrapper cannot be what ends it.
  for (const dieWithParent of [true, false]) {
    test(
      dieWithParent
        ? "dies with its parent when the harness is killed outright"
        : "control: without --die-with-parent it survives the harness",
      async () => {
        const command = isolatedCommand(spec(), ["sh", "-c", HEARTBEAT_LOOP, "sh", workDir, "beat"], { bwrapPath });
        const inner = command.argv.filter((arg) => dieWithParent || arg !== "--die-with-parent");
        // In the checkout: the wrapper runs as the sandbox user, as bwrap does.
        const wrapperPidFile = join(workDir, "wrapper.pid");
        const bwrapPidFile = join(workDir, "bwrap.pid");
        cleanups.push(async () => {
          const pid = Number(await readOrUndefined(bwrapPidFile));
          if (pid > 0) killHostTree(pid);
        });
        const running = runProcess({
          ...command,
          argv: [
            "sh",
            "-c",
            'echo $$ > "$1"; shift; bwrap_pid_file=$1; shift; setsid "$@" </dev/null >/dev/null 2>&1 & ' +
              'echo $! > "$bwrap_pid_file"; wait',
            "sh",
            wrapperPidFile,
            bwrapPidFile,
            ...inner,
          ],
          cwd: workDir,
          env: sandboxEnv(),
          timeout: 15_000,
        });
        await waitUntilBeating(join(workDir, "beat"));
        process.kill(Number(await readFile(wrapperPidFile, "utf8")), "SIGKILL");
        expect((await running).exitCode).toBe(137);
        expect(await stopsBeating(join(workDir, "beat"))).toBe(dieWithParent);
      },
    );
  }
});
