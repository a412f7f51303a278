import { accessSync, constants as fsConstants, lstatSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { access, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, normalize } from "node:path";
import { InvalidInputError } from "../../util/errors.js";
import { runProcess } from "../process.js";
import { giveToSandbox, letSandboxTraverse } from "./sandbox-access.js";
import { sandboxUserFor, type SandboxUser } from "./sandbox-user.js";
import { hostSeccompArch, seccompFilter } from "./seccomp.js";

/**
 * "none": a network namespace of its own with only a loopback device. "open": the host's
 * network namespace itself, so besides the internet the command reaches everything listening
 * on the host's 127.0.0.1 (Redis, the harness's own ports) and its abstract Unix sockets.
 */
export type NetworkMode = "open" | "none";

export interface IsolationSpec {
  /** The run's checkout: the only writable host path besides homeDir. */
  workDir: string;
  /** A fresh, empty per-run directory used as $HOME (writable). */
  homeDir: string;
  network: NetworkMode;
  /**
   * Files the harness hands the command (an agent's prompt), kept outside the checkout so
   * nothing searching it finds them. Read-only inside: only the harness writes and removes
   * them. Must not contain, or lie inside, workDir or homeDir.
   */
  scratchDir?: string;
  /** Extra host paths visible read-only (e.g. where an operator installed agent CLIs). Must be absolute. */
  readOnlyPaths?: readonly string[];
}

export type IsolationProbe =
  { available: true; bwrapPath: string; version: string } | { available: false; reason: string; fix: string };

/** What runProcess needs to start an isolated command: spread it into the request. */
export interface IsolatedCommand {
  argv: string[];
  /** The sandbox user bwrap is started as, when the harness is root. */
  uid?: number;
  gid?: number;
  /** Descriptor 3: the seccomp program bwrap loads (`--seccomp 3`). */
  extraInput: Buffer[];
}

export interface IsolationOptions {
  bwrapPath?: string;
  /**
   * The host user commands run as (see sandbox-user.ts); by default the one this host resolves
   * to with no HARNESS_SANDBOX_USER: none when the harness is not root.
   */
  user?: SandboxUser;
}

/**
 * The uid and gid the command sees. bwrap (not setuid) maps one id: its caller's, so uid 1000
 * inside is outside whoever started bwrap. When the harness is root that is the sandbox user
 * (sandbox-user.ts), never root: a root mapping would let the command write /proc/sys (the
 * kernel checks sysctl writes against the global uid, not the namespace's) and own every
 * root-owned file a mount shows it. workDir and homeDir belong to that same user, so inside
 * they appear as the command's own: it writes there and git sees no "dubious ownership"; the
 * harness, as root, still reads and removes what it leaves. A non-zero uid inside is worth
 * having too: tools that act differently as root behave as they would for a normal user.
 */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;

/**
 * Parts of the sandbox's own /proc that act on the whole host: sysctls (kernel.core_pattern
 * names a program the kernel runs as root on a crash) and the magic SysRq trigger; irq and bus
 * for good measure, as bwrap itself covers them when it can. Bound read-only over the fresh
 * /proc whatever uid the command has.
 */
const PROC_READ_ONLY = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];

/** bwrap reads the seccomp program from this descriptor (runProcess's first extraInput). */
const SECCOMP_FD = 3;

/** Top-level toolchain directories; on merged-/usr systems all but /usr are symlinks into it. */
const SYSTEM_DIRS = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/**
 * The part of /etc a command needs to resolve names (resolv.conf, hosts, host.conf,
 * nsswitch.conf, gai.conf, services, protocols), verify TLS (ssl, ca-certificates), map ids to
 * names (passwd, group), find shared libraries outside the default paths (ld.so.*), follow
 * Debian's alternatives symlinks and know the local time zone. Everything else in /etc (shadow,
 * ssh host keys, the operator's gitconfig, npmrc and pip.conf with registry tokens) stays out.
 */
const ETC_ENTRIES = [
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
];

const PROBE_TIMEOUT_MS = 10_000;
/**
 * The probe's command: names each argument the command cannot read (a folder it cannot also
 * enter), so a path bound in that only its owner can open is refused at start, not in a run.
 */
const UNREADABLE_PATHS =
  'for p do if [ ! -r "$p" ] || { [ -d "$p" ] && [ ! -x "$p" ]; }; then echo "unreadable: $p"; fi; done';
const INSTALL_FIX = "install it with `apt-get install bubblewrap`";

/**
 * How to run `argv` isolated with bubblewrap: bwrap's own options, then `--`, then argv; as
 * the sandbox user when the harness is root; with the seccomp filter on descriptor 3. Secrets
 * never go into this argv (it is readable by every process on the host through `ps` and inside
 * the sandbox through /proc/1/cmdline): the caller passes the command's environment through
 * spawn's env, which bwrap hands on to the command unchanged.
 */
export function isolatedCommand(
  spec: IsolationSpec,
  argv: readonly string[],
  options?: IsolationOptions,
): IsolatedCommand {
  if (argv.length === 0) throw new InvalidInputError("isolatedCommand needs a command to run");
  const user = options?.user ?? sandboxUserFor();
  if (user && (user.uid === 0 || user.gid === 0))
    throw new InvalidInputError("The sandbox user must not be root (uid or gid 0)");
  if (!user && process.getuid?.() === 0)
    throw new InvalidInputError("The harness runs as root but no sandbox user was given: refusing to run as root");
  const arch = hostSeccompArch();
  if (!arch) throw new InvalidInputError(`No seccomp filter for this machine (${process.arch})`);
  return {
    argv: isolatedArgv(spec, argv, options?.bwrapPath),
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    extraInput: [seccompFilter(arch)],
  };
}

function isolatedArgv(spec: IsolationSpec, argv: readonly string[], bwrapPathOption: string | undefined): string[] {
  const bwrapPath = bwrapPathOption ?? defaultBwrapPath();
  if (!isAbsolute(bwrapPath)) {
    // A bare name would be looked up in the command's PATH, which may point into the checkout.
    throw new InvalidInputError(`The bwrap path must be absolute, got "${bwrapPath}"`);
  }
  const workDir = checkedPath("workDir", spec.workDir);
  const homeDir = checkedPath("homeDir", spec.homeDir);
  const readOnlyPaths = (spec.readOnlyPaths ?? []).map((path) => checkedPath("readOnlyPaths entry", path));
  const scratchDir = spec.scratchDir !== undefined ? checkedPath("scratchDir", spec.scratchDir) : undefined;
  if (scratchDir !== undefined) {
    for (const [name, writable] of [
      ["workDir", workDir],
      ["homeDir", homeDir],
    ] as const) {
      if (isWithinOrEqual(writable, scratchDir) || isWithinOrEqual(scratchDir, writable)) {
        // Inside the checkout it would be what it exists to avoid; around it, it would expose siblings.
        throw new InvalidInputError(
          `scratchDir ${scratchDir} overlaps the ${name} ${writable}; it must be a separate directory`,
        );
      }
    }
  }
  for (const path of readOnlyPaths) {
    for (const [name, writable] of [
      ["workDir", workDir],
      ["homeDir", homeDir],
    ] as const) {
      if (isWithinOrEqual(writable, path)) {
        // Binding an ancestor of the checkout would also expose its siblings: other runs.
        throw new InvalidInputError(
          `readOnlyPaths entry ${path} contains the ${name} ${writable}; list a narrower directory`,
        );
      }
    }
  }

  const args = [
    bwrapPath,
    // Every namespace bwrap knows, including ones a future version adds. The user namespace is
    // requested again without "-try": when it cannot be created the command must fail rather
    // than run with the caller's real identity.
    "--unshare-all",
    "--unshare-user",
    ...(spec.network === "open" ? ["--share-net"] : []),
    "--uid",
    String(SANDBOX_UID),
    "--gid",
    String(SANDBOX_GID),
    // Nested user namespaces would hand the command a full capability set again (inside them),
    // which is what most kernel privilege escalations start from.
    "--disable-userns",
    // The command and everything it starts die with bwrap, and bwrap dies with the harness:
    // a crashed or killed harness leaves nothing running, and a timeout's SIGTERM to bwrap's
    // process group reaches the whole sandbox although it lives in another session.
    "--die-with-parent",
    // A new session has no controlling terminal, so TIOCSTI cannot type into the caller's.
    "--new-session",
    "--cap-drop",
    "ALL",
    "--hostname",
    "harness-sandbox",
    "--ro-bind",
    "/usr",
    "/usr",
    ...systemDirArgs(),
    ...ETC_ENTRIES.flatMap((entry) => ["--ro-bind-try", `/etc/${entry}`, `/etc/${entry}`]),
    "--proc",
    "/proc",
    ...PROC_READ_ONLY.flatMap((path) => [path === "/proc/sys" ? "--ro-bind" : "--ro-bind-try", path, path]),
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    ...readOnlyPaths.flatMap((path) => bindArgs("--ro-bind", path)),
    ...(scratchDir !== undefined ? bindArgs("--ro-bind", scratchDir) : []),
    // After the read-only paths, so a writable directory is never shadowed by one of them.
    ...bindArgs("--bind", workDir),
    ...bindArgs("--bind", homeDir),
    // The root is bwrap's own tmpfs: read-only, so /tmp, workDir and homeDir are the only
    // places a command can write, and nothing it leaves elsewhere can surprise the next step.
    "--remount-ro",
    "/",
    // Applied last, just before the command starts: bwrap's own set-up needs mount and unshare.
    "--seccomp",
    String(SECCOMP_FD),
    "--",
    ...argv,
  ];
  return args;
}

export interface ProbeOptions {
  bwrapPath?: string;
  /** HARNESS_SANDBOX_USER: the user commands run as when the harness is root. */
  sandboxUser?: string;
  /** Host paths every command will see read-only: the sandbox user must be able to read them. */
  readOnlyPaths?: readonly string[];
  /**
   * Host folders some commands will have paths inside of bound (the repository cache's root): the
   * sandbox user must be able to reach them, though it needs to read only what lies inside.
   */
  reachablePaths?: readonly string[];
}

/**
 * Whether isolation works on this host, found by running a trivial isolated command with the
 * same options every real command gets — the same host user, seccomp filter and read-only
 * paths — so an unsupported option, a disabled namespace, a user that cannot create one, a
 * path it cannot reach or a missing bwrap all show up here, once, instead of in the first run.
 * The answer is cached per process and options.
 */
export async function probeIsolation(options?: ProbeOptions): Promise<IsolationProbe> {
  const bwrapPath = options?.bwrapPath ?? defaultBwrapPath();
  const key = JSON.stringify([
    bwrapPath,
    options?.sandboxUser ?? "",
    options?.readOnlyPaths ?? [],
    options?.reachablePaths ?? [],
  ]);
  let probe = probes.get(key);
  if (!probe) {
    probe = runProbe(bwrapPath, options);
    probes.set(key, probe);
  }
  return probe;
}

const probes = new Map<string, Promise<IsolationProbe>>();

async function runProbe(bwrapPath: string, options: ProbeOptions | undefined): Promise<IsolationProbe> {
  try {
    return await probeOnce(bwrapPath, options);
  } catch (error) {
    // A probe that throws would be cached as a rejection: report it as an answer instead.
    const message = error instanceof Error ? error.message : String(error);
    return {
      available: false,
      reason: `could not probe bwrap: ${message}`,
      fix: `check that ${tmpdir()} is writable and run \`${bwrapPath} --version\``,
    };
  }
}

async function probeOnce(bwrapPath: string, options: ProbeOptions | undefined): Promise<IsolationProbe> {
  if (!isAbsolute(bwrapPath)) {
    return {
      available: false,
      reason: `the bwrap path "${bwrapPath}" is not absolute`,
      fix: "configure the absolute path of bwrap, e.g. /usr/bin/bwrap",
    };
  }
  try {
    await access(bwrapPath, fsConstants.X_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR")
      return { available: false, reason: `bwrap not found at ${bwrapPath}`, fix: INSTALL_FIX };
    return {
      available: false,
      reason: `bwrap at ${bwrapPath} cannot be executed (${code ?? "unknown error"})`,
      fix: `make it executable or ${INSTALL_FIX}`,
    };
  }

  if (!hostSeccompArch()) {
    return {
      available: false,
      reason: `the sandbox's seccomp filter knows x86_64 and aarch64, not this machine (${process.arch})`,
      fix: "run on x86_64 or aarch64, or on Daytona",
    };
  }
  let user: SandboxUser | undefined;
  try {
    user = sandboxUserFor(options?.sandboxUser);
  } catch (error) {
    return {
      available: false,
      reason: error instanceof Error ? error.message : String(error),
      fix: "set HARNESS_SANDBOX_USER to an unprivileged user of this host, or leave it unset",
    };
  }

  const base = await mkdtemp(join(tmpdir(), "harness-isolation-probe-"));
  try {
    const workDir = join(base, "work");
    const homeDir = join(base, "home");
    await mkdir(workDir);
    await mkdir(homeDir);
    await letSandboxTraverse(base, user);
    await giveToSandbox(workDir, user);
    await giveToSandbox(homeDir, user);
    const env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: homeDir };
    const readOnlyPaths = options?.readOnlyPaths ?? [];
    const command = isolatedCommand(
      { workDir, homeDir, network: "none", readOnlyPaths: [...readOnlyPaths, ...(options?.reachablePaths ?? [])] },
      ["sh", "-c", UNREADABLE_PATHS, "sh", ...readOnlyPaths],
      { bwrapPath, ...(user ? { user } : {}) },
    );
    const result = await runProcess({ ...command, cwd: workDir, env, timeout: PROBE_TIMEOUT_MS });
    if (result.exitCode !== 0) {
      if (result.timedOut) {
        return {
          available: false,
          reason: `bwrap did not run a trivial command within ${PROBE_TIMEOUT_MS / 1000} s`,
          fix: `run \`${bwrapPath} --unshare-all --ro-bind / / true\` by hand to see where it hangs`,
        };
      }
      return explainFailure(bwrapPath, result.exitCode, `${result.stderr}\n${result.stdout}`, user);
    }
    const unreadable = result.stdout
      .split("\n")
      .filter((line) => line.startsWith("unreadable: "))
      .map((line) => line.slice("unreadable: ".length));
    if (unreadable.length > 0) {
      const who = user ? `uid ${String(user.uid)}` : "the harness's own user";
      return {
        available: false,
        reason: `inside the sandbox, ${who} cannot read ${unreadable.join(", ")}`,
        fix:
          `make ${unreadable.length > 1 ? "them" : "it"} readable by ${who}` +
          (user ? ` (o+rX, or group ${String(user.gid)})` : "") +
          ", or leave it out of HARNESS_SANDBOX_READONLY_PATHS",
      };
    }
    const version = await runProcess({ argv: [bwrapPath, "--version"], cwd: workDir, env, timeout: PROBE_TIMEOUT_MS });
    const match = /(\d+\.\d+(?:\.\d+)?)/.exec(version.stdout);
    return { available: true, bwrapPath, version: match?.[1] ?? "unknown" };
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}

function explainFailure(
  bwrapPath: string,
  exitCode: number,
  output: string,
  user: SandboxUser | undefined,
): IsolationProbe {
  const said = firstLine(output);
  const who = user ? ` as the sandbox user (uid ${String(user.uid)}, gid ${String(user.gid)})` : "";
  const reason = `bwrap failed${who} with exit code ${String(exitCode)}: ${said || "(no output)"}`;
  if (/unknown option|unrecognized option/i.test(output)) {
    return { available: false, reason, fix: "upgrade bubblewrap to 0.8.0 or newer (needed for --disable-userns)" };
  }
  if (exitCode === 126 && user) {
    return { available: false, reason, fix: `let uid ${String(user.uid)} execute ${bwrapPath} (and reach its folder)` };
  }
  const unreachable = /can't find source path (\S+): permission denied/i.exec(output);
  if (unreachable && user) {
    return {
      available: false,
      reason,
      fix:
        `let uid ${String(user.uid)} reach ${unreachable[1] ?? "that path"}: every folder above it must be ` +
        `traversable by that user (o+x, or group ${String(user.gid)}), ` +
        "or move it outside private folders such as /root",
    };
  }
  if (/seccomp/i.test(output)) {
    return { available: false, reason, fix: "the kernel must support seccomp filters (CONFIG_SECCOMP_FILTER)" };
  }
  if (
    new RegExp(
      "namespace|uid map|gid map|setgroups|unshare|clone|" +
        "operation not permitted|permission denied|no space left on device",
      "i",
    ).test(output)
  ) {
    return { available: false, reason, fix: userNamespaceFix() };
  }
  return {
    available: false,
    reason,
    fix: `run \`${bwrapPath} --unshare-all --unshare-user --ro-bind / / true\` by hand to see why`,
  };
}

/** The host setting that most likely refuses user namespaces, read from /proc/sys. */
function userNamespaceFix(): string {
  const sysctl = (name: string): string | undefined => {
    try {
      return readFileSync(`/proc/sys/${name.replaceAll(".", "/")}`, "utf8").trim();
    } catch {
      return undefined;
    }
  };
  if (sysctl("kernel.unprivileged_userns_clone") === "0") {
    return "user namespaces are disabled: sysctl kernel.unprivileged_userns_clone=1";
  }
  if (sysctl("user.max_user_namespaces") === "0") {
    return "user namespaces are disabled: sysctl user.max_user_namespaces=15000";
  }
  if (sysctl("kernel.apparmor_restrict_unprivileged_userns") === "1") {
    return (
      "AppArmor restricts user namespaces: sysctl kernel.apparmor_restrict_unprivileged_userns=0, " +
      "or give bwrap an AppArmor profile with `userns,`"
    );
  }
  return (
    "user namespaces may be disabled: sysctl kernel.unprivileged_userns_clone=1 " +
    "(or user.max_user_namespaces=15000); " +
    "in a container, allow unshare/clone in its seccomp and AppArmor profiles"
  );
}

function firstLine(text: string): string {
  const line =
    text
      .split("\n")
      .map((part) => part.trim())
      .find((part) => part !== "") ?? "";
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

function checkedPath(what: string, path: string): string {
  if (path.includes("\0")) throw new InvalidInputError(`${what} contains a NUL byte`);
  if (!isAbsolute(path)) throw new InvalidInputError(`${what} must be an absolute path, got "${path}"`);
  const normalized = normalize(path).replace(/(.)\/+$/, "$1");
  if (normalized === "/") throw new InvalidInputError(`${what} cannot be /: that would expose the whole host`);
  return normalized;
}

function isWithinOrEqual(path: string, ancestor: string): boolean {
  return path === ancestor || path.startsWith(`${ancestor}/`);
}

/**
 * A bind at the same path, and at the resolved path too when a symlink leads there: bwrap
 * starts the command in the caller's (resolved) working directory when that exists inside, and
 * otherwise silently in $HOME.
 */
function bindArgs(option: "--bind" | "--ro-bind", path: string): string[] {
  const args = [option, path, path];
  let real: string | undefined;
  try {
    real = realpathSync(path);
  } catch {
    // Missing: bwrap itself reports it and refuses to start, which is what should happen.
  }
  if (real !== undefined && real !== path) args.push(option, real, real);
  return args;
}

let systemDirs: string[] | undefined;

/** /bin, /lib and friends as they exist on this host: a symlink stays a symlink. */
function systemDirArgs(): string[] {
  if (systemDirs) return systemDirs;
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    try {
      const stats = lstatSync(dir);
      if (stats.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
      else if (stats.isDirectory()) args.push("--ro-bind", dir, dir);
    } catch {
      // Not on this host (e.g. /lib32): nothing to show.
    }
  }
  systemDirs = args;
  return args;
}

let resolvedBwrap: string | undefined;

/**
 * bwrap from the harness's own PATH (the operator's, not a run's, which may lead into a
 * checkout), resolved once to an absolute path.
 */
function defaultBwrapPath(): string {
  if (resolvedBwrap !== undefined) return resolvedBwrap;
  const dirs = (process.env["PATH"] ?? "").split(":").filter((dir) => isAbsolute(dir));
  resolvedBwrap = "/usr/bin/bwrap";
  for (const dir of dirs) {
    const candidate = join(dir, "bwrap");
    try {
      accessSync(candidate, fsConstants.X_OK);
      resolvedBwrap = candidate;
      break;
    } catch {
      // Not here; keep looking.
    }
  }
  return resolvedBwrap;
}
