import { SettingsError } from "../util/errors.js";
import type { RedisAccess, RedisHost, RedisTarget } from "./redis-connection.js";

/** More would be a mistake, not a deployment: a client needs only a few to find the rest. */
const MAX_HOSTS = 64;
const MAX_LIST_LENGTH = 4_096;
const MAX_URL_LENGTH = 2_048;
const MAX_CREDENTIAL_LENGTH = 1_024;
/** More than any Redis deployment runs per master; WAIT for more than exist would refuse every write. */
const MAX_WAIT_REPLICAS = 16;

/** A host name, an IPv4 address, or an IPv6 address in brackets, then a port. */
const HOST_PORT = /^(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}))(?::(\d{1,5}))$/;
const SENTINEL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

const MODES = ["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"] as const;
/** Settings that only a cluster or a sentinel group takes: one node's URL carries its own. */
const ACCESS = ["REDIS_USERNAME", "REDIS_PASSWORD", "REDIS_TLS"] as const;
const SENTINEL_ONLY = ["REDIS_SENTINEL_NAME", "REDIS_SENTINEL_PASSWORD"] as const;

/**
 * The Redis of `HARNESS_QUEUE=bullmq`, from exactly one of: `REDIS_URL` (one node, with its
 * credentials and TLS in the URL), `REDIS_CLUSTER_NODES` (a cluster) or `REDIS_SENTINELS` with
 * `REDIS_SENTINEL_NAME` (the master a sentinel group watches). A cluster and a sentinel group take
 * `REDIS_USERNAME`, `REDIS_PASSWORD` and `REDIS_TLS`; sentinels with a password of their own,
 * `REDIS_SENTINEL_PASSWORD`. `REDIS_WAIT_REPLICAS` says how many replicas must hold each write.
 */
export function redisTargetFromEnv(env: NodeJS.ProcessEnv): RedisTarget {
  const set = MODES.filter((name) => Boolean(env[name]));
  if (set.length === 0)
    throw new SettingsError(
      "HARNESS_QUEUE=bullmq needs REDIS_URL (for example redis://127.0.0.1:6379), " +
        "REDIS_CLUSTER_NODES (a cluster's host:port list) or REDIS_SENTINELS with REDIS_SENTINEL_NAME",
    );
  if (set.length > 1)
    throw new SettingsError(`Set one of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS, not ${set.join(" and ")}`);
  const [mode] = set;
  if (mode === "REDIS_URL") {
    const url = env["REDIS_URL"] ?? "";
    for (const name of [...ACCESS, ...SENTINEL_ONLY])
      if (env[name])
        throw new SettingsError(
          `${name} goes with REDIS_CLUSTER_NODES or REDIS_SENTINELS; with REDIS_URL, put the credentials ` +
            "in the URL (redis://user:password@host:6379) and use rediss:// for TLS",
        );
    if (url.length > MAX_URL_LENGTH)
      throw new SettingsError(`REDIS_URL is ${String(url.length)} characters long; at most ${String(MAX_URL_LENGTH)}`);
    if (!/^rediss?:\/\//.test(url))
      throw new SettingsError(
        `REDIS_URL must start with redis:// or rediss://, got "${url.replace(/\/\/[^@/]*@/, "//***@")}"`,
      );
    return { mode: "node", url, ...waitReplicas(env, 0) };
  }
  if (mode === "REDIS_CLUSTER_NODES") {
    for (const name of SENTINEL_ONLY)
      if (env[name]) throw new SettingsError(`${name} goes with REDIS_SENTINELS, not REDIS_CLUSTER_NODES`);
    return {
      mode: "cluster",
      nodes: hostList("REDIS_CLUSTER_NODES", env["REDIS_CLUSTER_NODES"] ?? "", 6379),
      ...access(env),
      ...waitReplicas(env, 0),
    };
  }
  const name = env["REDIS_SENTINEL_NAME"] ?? "";
  if (!name)
    throw new SettingsError(
      "REDIS_SENTINELS needs REDIS_SENTINEL_NAME, the name the sentinels monitor the master under (e.g. mymaster)",
    );
  if (!SENTINEL_NAME.test(name))
    throw new SettingsError(
      `REDIS_SENTINEL_NAME may hold 1 to 64 letters, digits, "_", "." and "-", got "${shown(name)}"`,
    );
  const sentinelPassword = credential(env, "REDIS_SENTINEL_PASSWORD");
  return {
    mode: "sentinel",
    sentinels: hostList("REDIS_SENTINELS", env["REDIS_SENTINELS"] ?? "", 26379),
    name,
    ...access(env),
    ...(sentinelPassword === undefined ? {} : { sentinelPassword }),
    // A sentinel group exists to survive losing its master: by default an acknowledged write
    // must survive that too, so it waits for a replica's copy.
    ...waitReplicas(env, 1),
  };
}

/** `HARNESS_REDIS_PREFIX` (default `harness`): what every key of the deployment starts with. */
export function redisPrefixFromEnv(env: NodeJS.ProcessEnv): string {
  const prefix = env["HARNESS_REDIS_PREFIX"] || "harness";
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(prefix))
    throw new SettingsError(
      `HARNESS_REDIS_PREFIX may hold 1 to 64 letters, digits, "_", "." and "-", got "${shown(prefix)}"`,
    );
  return prefix;
}

/** `host:port,host:port`: every entry checked, the first wrong one named. */
function hostList(name: string, text: string, examplePort: number): RedisHost[] {
  const example = `10.0.0.1:${String(examplePort)},10.0.0.2:${String(examplePort)}`;
  if (text.length > MAX_LIST_LENGTH)
    throw new SettingsError(`${name} is ${String(text.length)} characters long; at most ${String(MAX_LIST_LENGTH)}`);
  const entries = text
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0) throw new SettingsError(`${name} must list host:port pairs, e.g. ${example}`);
  if (entries.length > MAX_HOSTS)
    throw new SettingsError(`${name} lists ${String(entries.length)} hosts; at most ${String(MAX_HOSTS)}`);
  return entries.map((entry) => {
    const match = HOST_PORT.exec(entry);
    const port = Number(match?.[2]);
    if (!match?.[1] || !Number.isInteger(port) || port < 1 || port > 65_535)
      throw new SettingsError(
        `${name} must be host:port pairs separated by commas (e.g. ${example}); "${shown(entry)}" is not one`,
      );
    return { host: match[1].replace(/^\[(.*)\]$/, "$1"), port };
  });
}

function access(env: NodeJS.ProcessEnv): RedisAccess {
  const username = credential(env, "REDIS_USERNAME");
  const password = credential(env, "REDIS_PASSWORD");
  const tls = env["REDIS_TLS"] ?? "";
  if (!["", "0", "1", "false", "true"].includes(tls))
    throw new SettingsError(`REDIS_TLS must be 1 or 0 (true or false), got "${shown(tls)}"`);
  return {
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    ...(tls === "1" || tls === "true" ? { tls: true } : {}),
  };
}

/** A credential as given; never echoed in a message. */
function credential(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  if (!value) return undefined;
  if (value.length > MAX_CREDENTIAL_LENGTH)
    throw new SettingsError(`${name} is longer than ${String(MAX_CREDENTIAL_LENGTH)} characters`);
  // eslint-disable-next-line no-control-regex -- control characters are what this refuses
  if (/[\u0000-\u001f\u007f]/.test(value))
    throw new SettingsError(`${name} holds a control character (a stray newline?)`);
  return value;
}

function waitReplicas(env: NodeJS.ProcessEnv, fallback: number): { waitReplicas: number } {
  const text = env["REDIS_WAIT_REPLICAS"];
  if (text === undefined || text === "") return { waitReplicas: fallback };
  const value = Number(text);
  if (!/^\d{1,2}$/.test(text) || value > MAX_WAIT_REPLICAS)
    throw new SettingsError(
      `REDIS_WAIT_REPLICAS must be a whole number from 0 to ${String(MAX_WAIT_REPLICAS)}, got "${shown(text)}"`,
    );
  return { waitReplicas: value };
}

/** A setting's value in a message: bounded, on one line. */
function shown(value: string): string {
  const line = value.replace(/[\r\n\t]/g, " ");
  return line.length > 80 ? `${line.slice(0, 80)}…` : line;
}
