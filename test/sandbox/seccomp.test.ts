import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { isolatedCommand, probeIsolation, type IsolatedCommand } from "../../src/sandbox/local/isolation.js";
import { giveToSandbox, letSandboxTraverse } from "../../src/sandbox/local/sandbox-access.js";
import { sandboxUserFor } from "../../src/sandbox/local/sandbox-user.js";
import {
  hostSeccompArch,
  REFUSED_SYSCALLS,
  seccompFilter,
  SYSCALL_NUMBERS,
  type SeccompArch,
} from "../../src/sandbox/local/seccomp.js";
import { runProcess } from "../../src/sandbox/process.js";

/*
 * The seccomp filter, read two ways: decoded and run by a small classic-BPF interpreter here
 * (so the aarch64 program is checked on an x86_64 machine too), and loaded for real by bwrap,
 * where perl's syscall() calls each refused number directly.
 */

const AUDIT_ARCH = { x64: 0xc000003e, arm64: 0xc00000b7, i386: 0x40000003, arm: 0x40000028 };
const EPERM = 1;
const ENOSYS = 38;
const CLONE_NEWUSER = 0x10000000;
const SIGCHLD = 17;

type Verdict = "allow" | "kill" | { errno: number };

/** Runs the filter the way the kernel does for one call: struct seccomp_data is nr, arch, ip, args. */
function verdict(program: Buffer, call: { arch: number; nr: number; arg0?: number }): Verdict {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr, 0);
  data.writeUInt32LE(call.arch, 4);
  data.writeUInt32LE((call.arg0 ?? 0) >>> 0, 16);
  let accumulator = 0;
  for (let pc = 0; pc * 8 < program.length; pc++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case 0x20: // ld [k]
        accumulator = data.readUInt32LE(k);
        break;
      case 0x15: // jeq #k
        pc += accumulator === k ? jt : jf;
        break;
      case 0x45: // jset #k
        pc += (accumulator & k) !== 0 ? jt : jf;
        break;
      case 0x06: {
        // ret #k
        const action = k & 0xffff0000;
        if (action >>> 0 === 0x7fff0000) return "allow";
        if (action >>> 0 === 0x80000000) return "kill";
        if (action === 0x00050000) return { errno: k & 0xffff };
        throw new Error(`unexpected return ${k.toString(16)}`);
      }
      default:
        throw new Error(`unexpected instruction ${code.toString(16)} at ${String(pc)}`);
    }
  }
  throw new Error("fell off the end of the program");
}

describe.each(["x64", "arm64"] as const)("the %s filter", (arch: SeccompArch) => {
  const program = seccompFilter(arch);
  const numbers = SYSCALL_NUMBERS[arch];
  const own = AUDIT_ARCH[arch];

  test("is whole sock_filter instructions, at most the kernel's 4096", () => {
    expect(program.length % 8).toBe(0);
    expect(program.length / 8).toBeLessThanOrEqual(4096);
  });

  test("answers EPERM for every refused call", () => {
    for (const name of REFUSED_SYSCALLS)
      expect(verdict(program, { arch: own, nr: numbers[name] }), name).toEqual({ errno: EPERM });
  });

  test("refuses clone only when it asks for a user namespace, and sends clone3 back to clone", () => {
    expect(verdict(program, { arch: own, nr: numbers.clone, arg0: SIGCHLD })).toBe("allow");
    expect(verdict(program, { arch: own, nr: numbers.clone, arg0: CLONE_NEWUSER | SIGCHLD })).toEqual({ errno: EPERM });
    expect(verdict(program, { arch: own, nr: numbers.clone3 })).toEqual({ errno: ENOSYS });
  });

  test("allows ordinary calls, and kills a foreign architecture's", () => {
    // read, write, openat/getpid: numbers that mean other calls elsewhere.
    for (const nr of [0, 1, 3, 39, 63, 64, 172, 257]) {
      if (Object.values(numbers).includes(nr)) continue;
      expect(verdict(program, { arch: own, nr }), String(nr)).toBe("allow");
    }
    const foreign = arch === "x64" ? AUDIT_ARCH.i386 : AUDIT_ARCH.arm;
    expect(verdict(program, { arch: foreign, nr: 20 })).toBe("kill");
    expect(verdict(program, { arch: arch === "x64" ? AUDIT_ARCH.arm64 : AUDIT_ARCH.x64, nr: 0 })).toBe("kill");
  });

  if (arch === "x64") {
    test("kills x32 calls, whose numbers would walk past every rule", () => {
      expect(verdict(program, { arch: own, nr: 0x40000000 | numbers.ptrace })).toBe("kill");
      expect(verdict(program, { arch: own, nr: 0x40000000 | 39 })).toBe("kill");
    });
  }
});

/** `#define __NR_name number` lines of a kernel header. */
function headerNumbers(path: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const match of readFileSync(path, "utf8").matchAll(/^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$/gm))
    found.set(match[1] ?? "", Number(match[2]));
  return found;
}

const HEADERS: Record<SeccompArch, string> = {
  x64: "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
  arm64: "/usr/include/asm-generic/unistd.h",
};

describe.each(["x64", "arm64"] as const)("the %s syscall numbers", (arch: SeccompArch) => {
  const header = HEADERS[arch];
  if (!existsSync(header))
    console.warn(`[seccomp.test] ${header} is missing (apt-get install linux-libc-dev): not compared`);
  test.skipIf(!existsSync(header))(`match the kernel's table (${header})`, () => {
    const kernel = headerNumbers(header);
    for (const [name, number] of Object.entries(SYSCALL_NUMBERS[arch])) expect(kernel.get(name), name).toBe(number);
  });
});

// --- Loaded for real ------------------------------------------------------------------------

const probe = await probeIsolation();
const arch = hostSeccompArch();
if (!probe.available) console.warn(`[seccomp.test] real-process tests skipped: ${probe.reason}; fix: ${probe.fix}`);
const perl = "/usr/bin/perl";
if (!existsSync(perl)) console.warn("[seccomp.test] real-process tests skipped: /usr/bin/perl is missing");
const runnable = probe.available && arch !== undefined && existsSync(perl);

let base: string;
let workDir: string;
let homeDir: string;
const user = sandboxUserFor();
const nodeDir = dirname(process.execPath);

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "harness-seccomp-test-"));
  workDir = join(base, "work");
  homeDir = join(base, "home");
  await mkdir(workDir);
  await mkdir(homeDir);
  await letSandboxTraverse(base, user);
  await giveToSandbox(workDir, user);
  await giveToSandbox(homeDir, user);
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

function command(script: string, args: readonly string[] = []): IsolatedCommand {
  return isolatedCommand(
    { workDir, homeDir, network: "none", readOnlyPaths: nodeDir.startsWith("/usr/") ? [] : [nodeDir] },
    ["sh", "-c", script, "sh", ...args],
  );
}

/** The same command with bwrap given no filter: what the calls do without it. */
function withoutFilter(isolated: IsolatedCommand): IsolatedCommand {
  const at = isolated.argv.indexOf("--seccomp");
  return { ...isolated, argv: [...isolated.argv.slice(0, at), ...isolated.argv.slice(at + 2)], extraInput: [] };
}

async function run(isolated: IsolatedCommand): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return runProcess({
    ...isolated,
    cwd: workDir,
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: homeDir },
    timeout: 20_000,
  });
}

/** Prints "<number> <result> <errno>" for each number given, calling it with six zero arguments. */
const CALL_EACH =
  `for n in "$@"; do ${perl} -e ` +
  `'$r = syscall($ARGV[0], 0, 0, 0, 0, 0, 0); printf "%s %d %d\\n", $ARGV[0], $r, $! + 0' "$n"; done`;

describe.skipIf(!runnable)("the filter in a real sandbox", () => {
  const numbers = SYSCALL_NUMBERS[arch ?? "x64"];

  test("is in force, with no new privileges, and fd 3 (its pipe) is closed before the command starts", async () => {
    const result = await run(command("grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; ls /proc/self/fd"));
    expect(result.stdout).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(result.stdout).toMatch(/^Seccomp:\s+2$/m);
    const fds = result.stdout.split("\n").filter((line) => /^\d+$/.test(line));
    // 0-2, and ls's own directory handle.
    expect(fds.length).toBeLessThanOrEqual(5);
  });

  test("every refused call answers EPERM", async () => {
    const refused = REFUSED_SYSCALLS.map((name) => String(numbers[name]));
    const result = await run(command(CALL_EACH, refused));
    const lines = result.stdout.trim().split("\n");
    expect(lines).toHaveLength(refused.length);
    for (const [index, line] of lines.entries()) {
      expect(line, REFUSED_SYSCALLS[index]).toBe(`${refused[index] ?? ""} -1 ${String(EPERM)}`);
    }
  });

  test("control: without the filter the same calls answer otherwise (so the test above can fail)", async () => {
    // ptrace(PTRACE_TRACEME), process_vm_readv of nothing and unshare(0) succeed; pidfd_getfd
    // on pidfd 0 is EBADF: none of them is EPERM.
    const calls = [numbers.ptrace, numbers.process_vm_readv, numbers.unshare, numbers.pidfd_getfd].map(String);
    const result = await run(withoutFilter(command(CALL_EACH, calls)));
    const errnos = result.stdout
      .trim()
      .split("\n")
      .map((line) => Number(line.split(" ")[2]));
    expect(errnos).toHaveLength(calls.length);
    for (const errno of errnos) expect(errno).not.toBe(EPERM);
    const filtered = await run(command(CALL_EACH, calls));
    expect(
      filtered.stdout
        .trim()
        .split("\n")
        .map((line) => Number(line.split(" ")[2])),
    ).toEqual(calls.map(() => EPERM));
  });

  test("no new user namespace: unshare -U fails, clone with CLONE_NEWUSER is EPERM, clone3 is ENOSYS", async () => {
    const script =
      "if unshare -U true 2>/dev/null; then echo unshared; else echo refused; fi; " +
      // `+ 0`: perl passes a string argument as a pointer to it, a number as the number.
      `${perl} -e 'printf "%d %d\\n", syscall($ARGV[0] + 0, $ARGV[1] + 0, 0, 0, 0, 0), $! + 0' "$1" "$2"; ` +
      `${perl} -e 'printf "%d %d\\n", syscall($ARGV[0] + 0, 0, 0), $! + 0' "$3"`;
    const result = await run(
      command(script, [String(numbers.clone), String(CLONE_NEWUSER | SIGCHLD), String(numbers.clone3)]),
    );
    expect(result.stdout.trim().split("\n")).toEqual(["refused", `-1 ${String(EPERM)}`, `-1 ${String(ENOSYS)}`]);
    // Threads still start (glibc falls back to clone when clone3 is ENOSYS), and so do processes.
    const node = await run(
      command(
        `"$1" -e 'new (require("node:worker_threads").Worker)("0", { eval: true }); ` +
          `require("node:child_process").execFileSync("true"); console.log("ok")'`,
        [process.execPath],
      ),
    );
    expect(node.stderr).toBe("");
    expect(node.stdout.trim()).toBe("ok");
  });

  test("ptrace cannot attach to a process beside it", async () => {
    // PTRACE_ATTACH (16) to a sleep started beside it.
    const attach = `${perl} -e 'printf "%d %d\\n", syscall($ARGV[0] + 0, 16, $ARGV[1] + 0, 0, 0), $! + 0'`;
    const script = `sleep 5 & ${attach} "$1" $!; kill $!`;
    const result = await run(command(script, [String(numbers.ptrace)]));
    expect(result.stdout.trim()).toBe(`-1 ${String(EPERM)}`);
  });

  test.skipIf(arch !== "x64")("an x32 call kills the process (SIGSYS)", async () => {
    const result = await run(command(`${perl} -e 'syscall(0x40000000 | 39)'; echo "status $?"`));
    expect(result.stdout.trim()).toBe("status 159");
  });
});
