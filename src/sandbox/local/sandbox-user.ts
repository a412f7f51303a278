import { readFileSync } from "node:fs";
import { InvalidInputError } from "../../util/errors.js";

/**
 * The host user an isolated command runs as when the harness is root. Non-setuid bubblewrap
 * maps the command's uid to its caller's, so without a switch the agent would be uid 0 on the
 * host: able to write the host's sysctls through /proc/sys (kernel.core_pattern runs a program
 * as real root on the next crash), and owner of every root-owned file a mount lets it reach.
 * Started as an unprivileged user, bwrap maps the command to that user instead.
 */
export interface SandboxUser {
  uid: number;
  gid: number;
}

/** The system user `.ci/run` and docs/deploy.md create for the sandbox. */
export const SANDBOX_USER_NAME = "harness-sandbox";
/**
 * Used when that user does not exist: an id no account or subordinate range has by default.
 * useradd gives people 1000–60000 and hands out subordinate ranges from 100000 (a rootless
 * container's root is very often exactly 100000), systemd's dynamic users live in 61184–65519,
 * and 65534 is nobody, which other daemons share.
 */
export const FALLBACK_SANDBOX_ID = 99999;

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$/;
const IDS = /^(\d{1,10})(?::(\d{1,10}))?$/;
const MAX_ID = 2 ** 31 - 1;

export interface HostAccounts {
  /** The harness's own uid: only root switches. */
  uid: number;
  /** /etc/passwd's text, or undefined when it cannot be read. */
  passwd: () => string | undefined;
}

/**
 * Why a HARNESS_SANDBOX_USER value cannot work, or undefined when its form is right (a user
 * name, or `uid[:gid]`); whether the name exists is known only on the host that runs commands.
 */
export function sandboxUserSettingProblem(setting: string): string | undefined {
  const ids = IDS.exec(setting);
  if (ids) {
    const [uid, gid] = [Number(ids[1]), Number(ids[2] ?? ids[1])];
    if (uid > MAX_ID || gid > MAX_ID) return `HARNESS_SANDBOX_USER ids must be at most ${String(MAX_ID)}`;
    if (uid === 0 || gid === 0) return rootRefusal(setting);
    return undefined;
  }
  if (setting === "root") return rootRefusal(setting);
  if (!NAME.test(setting)) return `HARNESS_SANDBOX_USER must be a user name or uid[:gid], got "${setting}"`;
  return undefined;
}

/**
 * Who isolated commands run as on this host: undefined when the harness is not root (bwrap then
 * maps them to the harness's own, unprivileged uid, and nothing needs to change); else the user
 * the setting names, or `harness-sandbox` when it exists, or FALLBACK_SANDBOX_ID. Throws
 * InvalidInputError, with the fix, for a setting that cannot work here.
 */
export function resolveSandboxUser(setting: string | undefined, host: HostAccounts): SandboxUser | undefined {
  if (host.uid !== 0) return undefined;
  if (setting !== undefined && setting !== "") {
    const problem = sandboxUserSettingProblem(setting);
    if (problem) throw new InvalidInputError(problem);
    const ids = IDS.exec(setting);
    if (ids) return { uid: Number(ids[1]), gid: Number(ids[2] ?? ids[1]) };
    const user = lookUp(setting, host.passwd());
    if (!user) {
      throw new InvalidInputError(
        `HARNESS_SANDBOX_USER names the user "${setting}", which is not in /etc/passwd: create it ` +
          `(useradd --system --no-create-home --shell /usr/sbin/nologin ${setting}) or give uid[:gid]`,
      );
    }
    if (user.uid === 0 || user.gid === 0) throw new InvalidInputError(rootRefusal(setting));
    return user;
  }
  const user = lookUp(SANDBOX_USER_NAME, host.passwd());
  if (user && user.uid !== 0 && user.gid !== 0) return user;
  return { uid: FALLBACK_SANDBOX_ID, gid: FALLBACK_SANDBOX_ID };
}

const resolved = new Map<string, SandboxUser | undefined>();

/** resolveSandboxUser for this process and host, once per setting. */
export function sandboxUserFor(setting?: string): SandboxUser | undefined {
  const key = setting ?? "";
  if (resolved.has(key)) return resolved.get(key);
  const user = resolveSandboxUser(setting, {
    uid: process.getuid?.() ?? -1,
    passwd: () => {
      try {
        return readFileSync("/etc/passwd", "utf8");
      } catch {
        return undefined;
      }
    },
  });
  resolved.set(key, user);
  return user;
}

function rootRefusal(setting: string): string {
  return (
    `HARNESS_SANDBOX_USER "${setting}" is root (uid or gid 0): agents must never run as host root; ` +
    `name an unprivileged user such as ${SANDBOX_USER_NAME}`
  );
}

function lookUp(name: string, passwd: string | undefined): SandboxUser | undefined {
  for (const line of (passwd ?? "").split("\n")) {
    const fields = line.split(":");
    if (fields[0] !== name || fields.length < 4) continue;
    const uid = Number(fields[2]);
    const gid = Number(fields[3]);
    if (Number.isInteger(uid) && Number.isInteger(gid) && fields[2] !== "" && fields[3] !== "") return { uid, gid };
  }
  return undefined;
}
