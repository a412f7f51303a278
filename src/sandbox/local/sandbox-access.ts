import { chmod, chown, lchown } from "node:fs/promises";
import { sandboxBaseEnv } from "../environment.js";
import { runProcess } from "../process.js";
import type { SandboxUser } from "./sandbox-user.js";

/*
 * What the sandbox user needs of the host's files when the harness is root and commands run as
 * that user: its checkout and HOME as its own, and a way through the harness's private folders
 * to them and to what is bound in read-only. Every folder the harness owns stays the harness's;
 * the sandbox user's group is given passage (0710: enter, not list) or reading, never more.
 * With no sandbox user (the harness is not root) each of these does nothing: bubblewrap maps
 * commands to the harness's own uid, which already owns everything here.
 */

/** chown walks a checkout's 50,000 files in about 0.2 s (0.1 s when they are already the user's). */
const HAND_OVER_TIMEOUT_MS = 120_000;
const PATHS_PER_CHOWN = 500;

/** The sandbox user may pass through `dir` (to a path inside it it knows), not list or write it. */
export async function letSandboxTraverse(dir: string, user: SandboxUser | undefined): Promise<void> {
  if (!user) return;
  await chown(dir, -1, user.gid);
  await chmod(dir, 0o710);
}

/**
 * The sandbox user may read `path` (a file, or a folder it may list), or with `mode` 0o660 also
 * connect to it (a Unix socket); its owner stays the harness.
 */
export async function letSandboxRead(
  path: string,
  user: SandboxUser | undefined,
  mode: 0o640 | 0o750 | 0o660 = 0o640,
): Promise<void> {
  if (!user) return;
  await chown(path, -1, user.gid);
  await chmod(path, mode);
}

/** A file or folder the harness made in a checkout becomes the sandbox user's (a symlink itself, not its target). */
export async function giveToSandbox(path: string, user: SandboxUser | undefined): Promise<void> {
  if (!user) return;
  await lchown(path, user.uid, user.gid);
}

/**
 * Everything under `roots` the harness wrote becomes the sandbox user's. `chown -R` in C rather
 * than a walk in Node (ten times faster on a large checkout); `-P` never follows a symlink (a
 * repository's links change owner themselves, never what they point at), and `--from` leaves
 * alone what is already the user's, so a spare checkout handed over earlier costs only the
 * walk, and its files keep the change times their index recorded.
 */
export async function handOverTree(roots: string | readonly string[], user: SandboxUser | undefined): Promise<void> {
  const paths = typeof roots === "string" ? [roots] : roots;
  if (!user || paths.length === 0) return;
  const from = String(process.getuid?.() ?? 0);
  // In batches, so a folder of very many entries never overflows the argument list.
  for (let start = 0; start < paths.length; start += PATHS_PER_CHOWN) {
    const batch = paths.slice(start, start + PATHS_PER_CHOWN);
    const result = await runProcess({
      argv: ["chown", "-R", "-P", `--from=${from}`, `${String(user.uid)}:${String(user.gid)}`, "--", ...batch],
      cwd: "/",
      env: sandboxBaseEnv(),
      timeout: HAND_OVER_TIMEOUT_MS,
    });
    if (result.exitCode !== 0) {
      const detail = (result.stderr || result.stdout).trim().split("\n").slice(-2).join(" ");
      throw new Error(`could not give ${batch[0] ?? ""} to the sandbox user ${String(user.uid)}: ${detail}`);
    }
  }
}
