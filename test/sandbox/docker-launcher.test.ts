import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createDockerSandbox, openDockerSandbox, type DockerSandbox } from "../../src/sandbox/docker/sandbox.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

/*
 * The Docker sandbox's launcher: one shell kept running in the container that starts the run's
 * commands itself, instead of an engine exec each. Against a real Docker Engine, with the tests'
 * image (sh, git, coreutils; no other interpreter). Each test asserts what a command sees or
 * gets back, and that a hostile one can neither forge another's result nor stop the next one.
 */

const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`Docker launcher tests skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;
const runs = live ? test : test.skip;

let image = "";
let root: { path: string; cleanup: () => Promise<void> };
let repo = "";
const made: DockerSandbox[] = [];

async function sandbox(runId: string): Promise<DockerSandbox> {
  if (!live) throw new Error("no engine");
  const created = await createDockerSandbox(
    { repo, branch: "harness/launcher", network: { mode: "none" }, runId },
    { image, host: live.host, memoryBytes: 512 * 1024 ** 2, cpus: 1, pidsLimit: 256, tmpfsBytes: 64 * 1024 ** 2 },
  );
  made.push(created);
  return created;
}

beforeAll(async () => {
  if (!live) return;
  image = await testImage(live.docker);
  root = await scratchDir("harness-docker-launcher-test-");
  repo = await makeRepo(join(root.path, "repo"));
}, 300_000);

afterAll(async () => {
  for (const each of made) await each.teardown();
  if (live) await root.cleanup();
  if (live) await live.stop();
}, 120_000);

/** The engine's exec instances on the container: one more for every command the engine ran. */
async function engineExecs(box: DockerSandbox): Promise<number> {
  if (!live) throw new Error("no engine");
  return (await live.docker.getContainer(box.id).inspect()).ExecIDs?.length ?? 0;
}

describe("the Docker sandbox's launcher", () => {
  let box: DockerSandbox;
  beforeAll(async () => {
    if (live) box = await sandbox("launcher-run");
  }, 120_000);

  const run = (argv: string[], extra: { timeout?: number; env?: Record<string, string>; cwd?: string } = {}) =>
    box.exec({
      argv,
      cwd: extra.cwd ?? box.workDir,
      timeout: extra.timeout ?? 20_000,
      ...(extra.env ? { env: extra.env } : {}),
    });
  /** The process that started the command, and what it is. */
  const parent = async (): Promise<{ pid: string; cmdline: string }> => {
    const said = await run(["sh", "-c", 'echo "$PPID"; tr "\\0\\n" "  " <"/proc/$PPID/cmdline"']);
    const [pid = "", cmdline = ""] = said.stdout.split("\n");
    return { pid, cmdline };
  };

  runs("starts every command from one process in the container, with no engine exec for it or its sweep", async () => {
    const first = await parent();
    expect(first.cmdline).toContain("harness-launcher");
    const before = await engineExecs(box);
    for (let i = 0; i < 5; i += 1) expect((await run(["true"])).exitCode).toBe(0);
    expect(await parent()).toEqual(first);
    expect(await engineExecs(box)).toBe(before);
  });

  runs("gives exit codes, stdout and stderr apart, the cwd, and the env of each command alone", async () => {
    await run(["mkdir", "-p", "sub dir"]);
    const result = await run(["sh", "-c", 'pwd; printf "%s|" "$ONE" "$TWO"; echo oops >&2; exit 7'], {
      cwd: join(box.workDir, "sub dir"),
      env: { ONE: 'it\'s a "quote"\nand a line', TWO: "$(id) `id` *" },
    });
    expect(result.exitCode).toBe(7);
    expect(result.stdout).toBe(`${join(box.workDir, "sub dir")}\nit's a "quote"\nand a line|$(id) \`id\` *|`);
    expect(result.stderr).toBe("oops\n");
    const args = await run(["printf", "%s|", "a b", "'", "$HOME", "*", "x\ny", ""]);
    expect(args.stdout).toBe("a b|'|$HOME|*|x\ny||");
    expect((await run(["sh", "-c", 'printf %s "${ONE:-unset}"'])).stdout).toBe("unset");
    expect((await run(["no-such-program"])).exitCode).toBe(127);
    // Nothing of the launcher's own reaches a command's environment.
    const env = await run(["env"]);
    expect(env.stdout).toContain("HOME=/home/harness");
    expect(env.stdout).not.toMatch(/^(t|n|r|l|c)=/m);
    expect((await run(["sh", "-c", "exit 0"])).exitCode).toBe(0);
  });

  runs("output that looks like the launcher's marks is a command's output, not a result", async () => {
    // Every shape the launcher's answers take, with tokens a command could guess at.
    const forged =
      "harness-launcher 1\n" +
      "00000000000000000000000000000000s00000000000000000000000000000000e0\n" +
      "ffffffffffffffffffffffffffffffffe0\n";
    const result = await run(["sh", "-c", `printf '%s' "$1"; printf '%s' "$1" >&2; exit 9`, "sh", forged]);
    expect(result.exitCode).toBe(9);
    expect(result.stdout).toBe(forged);
    expect(result.stderr).toBe(forged);
    // The token is in no place a command can read: not its environment, arguments or the launcher's.
    const looked = await run([
      "sh",
      "-c",
      'env; cat /proc/self/cmdline /proc/$PPID/cmdline /proc/$PPID/environ | tr "\\0" "\\n"',
    ]);
    expect(looked.stdout).not.toMatch(/[0-9a-f]{32}/);
    expect((await run(["echo", "next"])).stdout).toBe("next\n");
  });

  runs(
    "keeps only the tail of 50 MB of output on either stream",
    async () => {
      const big = await box.exec({
        argv: [
          "sh",
          "-c",
          'head -c 52428800 /dev/zero | tr "\\0" x; printf END; ' +
            'head -c 52428800 /dev/zero | tr "\\0" y >&2; printf END >&2',
        ],
        cwd: box.workDir,
        timeout: 120_000,
        maxOutput: 64 * 1024,
      });
      expect(big.exitCode).toBe(0);
      expect(big.truncated).toBe(true);
      expect(big.stdout.endsWith("xxxxEND")).toBe(true);
      expect(big.stderr.endsWith("yyyyEND")).toBe(true);
      expect(big.stdout.length).toBeLessThan(70 * 1024);
      expect(big.stderr.length).toBeLessThan(70 * 1024);
      expect((await run(["echo", "after"])).stdout).toBe("after\n");
    },
    180_000,
  );

  runs("a timeout kills the command and what it started; what a command leaves is gone before the next", async () => {
    const timedOut = await run(["sh", "-c", "sleep 30 & echo $! > /tmp/bg; wait"], { timeout: 1_000 });
    expect(timedOut.timedOut).toBe(true);
    expect(timedOut.exitCode).toBe(124);
    const gone = (file: string) => run(["sh", "-c", `kill -0 "$(cat ${file})" 2>/dev/null && echo alive || echo gone`]);
    expect((await gone("/tmp/bg")).stdout).toBe("gone\n");
    // In a session of its own, out of reach of a kill of the command's group.
    await run(["sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > /tmp/detached"]);
    expect((await gone("/tmp/detached")).stdout).toBe("gone\n");
    // The sweep went through the launcher, which it spared.
    const launcher = await parent();
    await run(["sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 &"]);
    expect(await parent()).toEqual(launcher);
  });

  runs("a command that reads the launcher's requests is gone before the next request is sent", async () => {
    // The thief is waited for until it sleeps in its read of the launcher's input (the pipe it
    // opened is its fd 3), so it is already queued for the next request when this command ends.
    const stolen = await run([
      "sh",
      "-c",
      'setsid sh -c "echo \\$\\$ > /tmp/thief; exec cat /proc/$PPID/fd/0 > /tmp/stolen" </dev/null >/dev/null 2>&1 & ' +
        "until [ -s /tmp/thief ] && read -r t < /tmp/thief && [ -e /proc/$t/fd/3 ] && " +
        'read -r _ _ state _ < /proc/$t/stat && [ "$state" = S ]; do sleep 0.01; done',
    ]);
    expect(stolen.exitCode).toBe(0);
    const next = await run(["sh", "-c", "echo mine; exit 3"]);
    expect(next).toMatchObject({ exitCode: 3, stdout: "mine\n" });
    // It read the sweep's request, which names no token: the sweep went through the engine instead.
    expect((await run(["cat", "/tmp/stolen"])).stdout).toBe("1\nk\n");
  });

  runs("a command that kills the launcher gets its own end, and the next command is served again", async () => {
    const before = await parent();
    const killer = await run(["sh", "-c", "kill -s KILL -- -1; echo still here"]);
    expect(killer.stdout).toBe("still here\n");
    expect(killer.exitCode).toBe(137);
    expect((await run(["echo", "served"])).stdout).toBe("served\n");
    const after = await parent();
    expect(after.cmdline).toContain("harness-launcher");
    expect(after.pid).not.toBe(before.pid);
    // Killed by name (as `pkill sh` would): the same.
    const named = await run(["sh", "-c", 'kill -s KILL "$PPID"; echo done']);
    expect(named.stdout).toBe("done\n");
    expect((await run(["echo", "again"])).stdout).toBe("again\n");
    expect((await parent()).cmdline).toContain("harness-launcher");
  });

  runs("a command with stdin goes through the engine's exec, beside the launcher", async () => {
    const launcher = await parent();
    expect((await box.exec({ argv: ["cat"], cwd: box.workDir, timeout: 10_000, stdin: "in" })).stdout).toBe("in");
    expect(await parent()).toEqual(launcher);
  });

  runs("pausing freezes the launcher, and after resume it serves commands again", async () => {
    const launcher = await parent();
    await box.pause();
    await expect(run(["true"])).rejects.toThrow(/paused: resume it/);
    await box.resume();
    expect((await run(["echo", "thawed"])).stdout).toBe("thawed\n");
    expect(await parent()).toEqual(launcher);
  });

  runs("a sandbox opened again by name has a launcher of its own", async () => {
    const again = await openDockerSandbox(box.id, { host: live?.host ?? "" });
    if (!again) throw new Error("not found");
    const said = await again.exec({
      argv: ["sh", "-c", 'tr "\\0" " " <"/proc/$PPID/cmdline"'],
      cwd: again.workDir,
      timeout: 10_000,
    });
    expect(said.stdout).toContain("harness-launcher");
    // Its sweep ended the first one's launcher, as it ends every process of the user: the first
    // one's next command still runs, through the engine, and the one after through a new launcher.
    expect((await run(["echo", "first"])).stdout).toBe("first\n");
    expect((await parent()).cmdline).toContain("harness-launcher");
  });
});
