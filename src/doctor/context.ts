import { readFile } from "node:fs/promises";
import type { Daytona } from "@daytonaio/sdk";
import { parse as parseYaml } from "yaml";
import { settingsFromEnv, type AppModeSettings, type AppSettings } from "../runtime/app-settings.js";
import { daytonaClient } from "../sandbox/daytona/client.js";
import type { DaytonaOptions } from "../sandbox/types.js";
import { describeError } from "../util/errors.js";

/** What the App asks GitHub for (`app.yml`'s `default_permissions` and `default_events`). */
export interface AppManifest {
  permissions: Record<string, string>;
  events: string[];
}

/** The process's settings as the server reads them, or why they cannot be read. */
export type SettingsReading = { ok: true; settings: AppSettings } | { ok: false; problem: string };

/**
 * Everything the checks read or call, made once per doctor run. The clients are injected so the
 * tests point them at fakes on 127.0.0.1 and need no network.
 */
export interface DoctorContext {
  /** The environment the server and the CLI are configured by. */
  env: NodeJS.ProcessEnv;
  settings: SettingsReading;
  /** How GitHub and the model APIs are called. */
  fetch: typeof globalThis.fetch;
  /** Milliseconds since the epoch: which webhook deliveries are recent. */
  now: () => number;
  manifest: () => Promise<AppManifest>;
  /** A Daytona client whose every HTTP wait ends within `requestTimeoutMs`. */
  daytona: (options: DaytonaOptions, requestTimeoutMs: number) => Daytona;
  /** Below this much free space where the repository cache lives, the disk check fails. */
  minFreeBytes: number;
}

export type DoctorOverrides = Partial<Omit<DoctorContext, "env" | "settings">>;

/** At least this much room for the repository mirrors and the runs' checkouts. */
export const DEFAULT_MIN_FREE_BYTES = 2 * 1024 ** 3;

export function createDoctorContext(env: NodeJS.ProcessEnv, overrides: DoctorOverrides = {}): DoctorContext {
  return {
    env,
    settings: readSettings(env),
    fetch: overrides.fetch ?? globalThis.fetch,
    now: overrides.now ?? Date.now,
    manifest: overrides.manifest ?? (() => readManifest(new URL("../../app.yml", import.meta.url))),
    daytona: overrides.daytona ?? ((options, requestTimeoutMs) => daytonaClient(options, env, requestTimeoutMs)),
    minFreeBytes: overrides.minFreeBytes ?? DEFAULT_MIN_FREE_BYTES,
  };
}

/** settingsFromEnv, with its refusal kept as the answer rather than thrown. */
export function readSettings(env: NodeJS.ProcessEnv): SettingsReading {
  try {
    return { ok: true, settings: settingsFromEnv(env) };
  } catch (error) {
    return { ok: false, problem: describeError(error) };
  }
}

/**
 * The App's settings, for a check that needs `settings` (it runs only once they were read in
 * app mode, so this does not throw for it).
 */
export function appSettings(context: DoctorContext): AppModeSettings {
  const reading = context.settings;
  if (!reading.ok) throw new Error(`the settings cannot be read: ${reading.problem}`);
  if (reading.settings.mode !== "app") throw new Error("the App has no credentials yet (setup mode)");
  return reading.settings;
}

/** `app.yml`, the manifest the App was registered from (the shipped file, beside package.json). */
export async function readManifest(path: URL | string): Promise<AppManifest> {
  const raw: unknown = parseYaml(await readFile(path, "utf8"));
  const record = isRecord(raw) ? raw : {};
  const permissions = isRecord(record["default_permissions"]) ? record["default_permissions"] : {};
  const events = Array.isArray(record["default_events"]) ? record["default_events"] : [];
  return {
    permissions: Object.fromEntries(
      Object.entries(permissions).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
    ),
    events: events.filter((event): event is string => typeof event === "string"),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
