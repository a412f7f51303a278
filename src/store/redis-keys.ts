/**
 * Where each store's keys live under `HARNESS_REDIS_PREFIX`, as Redis Cluster needs them.
 *
 * A cluster runs a Lua script or a MULTI only when every key it touches hashes to one slot, and
 * a key's slot is that of its hash tag (the text between its first `{` and the next `}`) when it
 * has one. So the keys of each store share one tag of the store's own:
 * - per store, not per entity, because its scripts span its entities: the queue's admission
 *   weighs a repository's and an installation's runs together, a pending request counts against
 *   its issue and its requester, eviction from the ledger picks any pull request, a spend hold
 *   counts on a run, a repository and an installation at once. Per-entity tags would split what
 *   a script must see whole.
 * - not one tag for all of Harness, so the stores spread over up to nine slots, and so over
 *   the masters of a cluster, rather than loading one master with everything.
 * - the journal, which carries nearly all the bytes (every run's output), keeps a tag per run
 *   (`<prefix>:journal:{<run id>}:…`): only a run's own keys are ever written together, so runs
 *   spread over every master.
 * BullMQ's keys take the queue's tag as their prefix (`{harness}:runs:…`), which is how BullMQ
 * asks to be run on a cluster; the queue's own records share that slot, so one master holds the
 * whole queue and no second one can take it down.
 *
 * The layout is the same on one Redis, a cluster or behind sentinels, so a deployment can move
 * between them; on one Redis the tags only change the names.
 */
export type RedisStoreName = "pending" | "pulls" | "spend" | "audit" | "gateway" | "ratelimit" | "sessions" | "inbox";

/** The tagged namespace of a store's keys: `{<prefix>:<store>}`. */
export function storeNamespace(prefix: string, store: RedisStoreName): string {
  return `{${prefix}:${store}}`;
}

/** The queue's tagged namespace, BullMQ's prefix and the root of the queue's own keys: `{<prefix>}`. */
export function queueNamespace(prefix: string): string {
  return `{${prefix}}`;
}

/** The journal's namespace: untagged, for each run's keys carry their own tag. */
export function journalNamespace(prefix: string): string {
  return `${prefix}:journal`;
}
