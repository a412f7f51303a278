import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import type { SessionToResume } from "../harness/session-resume.js";
import { DEFAULT_MAX_SESSION_RECORDS, type SessionStore } from "../harness/session-store.js";
import { SqliteSessionStore } from "../runs/sessions/sqlite.js";
import { describeError } from "../util/errors.js";
import { UsageError } from "./usage-error.js";

/**
 * Where `harness run` keeps its agents' session records, so that a later `harness run --continue
 * <run id>` finds them: the HARNESS_DB file when this machine has one (the App's runs and the CLI's
 * side by side), else `sessions.db` in the user's state folder — HARNESS_STATE_DIR, else
 * `$XDG_STATE_HOME/harness`, else `~/.local/state/harness`.
 */
export function sessionRecordsFile(env: NodeJS.ProcessEnv): string {
  const db = env["HARNESS_DB"]?.trim();
  if (db) return db;
  const own = env["HARNESS_STATE_DIR"]?.trim();
  if (own) return join(resolve(own), "sessions.db");
  // The XDG spec says a relative XDG_STATE_HOME is to be ignored.
  const xdg = env["XDG_STATE_HOME"]?.trim();
  if (xdg && isAbsolute(xdg)) return join(xdg, "harness", "sessions.db");
  const home = env["HOME"]?.trim() || homedir();
  return join(home, ".local", "state", "harness", "sessions.db");
}

/**
 * The store this run keeps its agent's session record in. A file that cannot be opened is a
 * warning, not a failed run: keeping the record is for a later run, this one can do without.
 */
export function openSessionRecords(env: NodeJS.ProcessEnv, warn: (line: string) => void): SessionStore | undefined {
  const path = sessionRecordsFile(env);
  try {
    return new SqliteSessionStore({ path });
  } catch (error) {
    warn(`the agent's session is not kept this run: ${whyNotOpened(path, error)}`);
    return undefined;
  }
}

/** Closes the store, saying whether it kept run `runId`'s session (a store that cannot say, did not). */
export async function closeSessionRecords(store: SessionStore, runId: string): Promise<boolean> {
  try {
    return (await store.get(runId)) !== undefined;
  } catch {
    return false;
  } finally {
    await store.close();
  }
}

/**
 * The kept session of run `runId`, for `--continue`. A run with no record here is a mistake in
 * the command (a wrong id, another machine, or a record forgotten as newer ones came), said in one
 * line before anything runs.
 */
export async function sessionToContinue(runId: string, env: NodeJS.ProcessEnv): Promise<SessionToResume> {
  const path = sessionRecordsFile(env);
  let store: SessionStore;
  try {
    store = new SqliteSessionStore({ path });
  } catch (error) {
    throw new UsageError(`cannot look up run ${runId}'s agent session: ${whyNotOpened(path, error)}`);
  }
  try {
    const record = await store.get(runId);
    if (!record)
      throw new UsageError(
        `no agent session is kept for run ${runId} in ${path} ` +
          `(it keeps the ${String(DEFAULT_MAX_SESSION_RECORDS)} newest runs' sessions of agents that keep one)`,
      );
    return { record, from: `run ${runId}` };
  } finally {
    await store.close();
  }
}

function whyNotOpened(path: string, error: unknown): string {
  // The store's own message names HARNESS_DB, which may not be the file here.
  const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
  return `cannot open ${path}: ${describeError(cause)}`;
}
