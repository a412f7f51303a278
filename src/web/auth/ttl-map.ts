/**
 * A map whose entries expire at a given time and which never holds more than `maxEntries`:
 * when full, the entry inserted first goes. Used for the access-check cache and the sets of
 * spent login states and ended sessions, which a flood of requests must not grow without end.
 */
export class TtlMap<K, V> {
  readonly #entries = new Map<K, { value: V; expiresAt: number }>();

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  get(key: K): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  has(key: K): boolean {
    return this.get(key) !== undefined;
  }

  set(key: K, value: V, expiresAt: number): void {
    this.#entries.delete(key);
    if (this.#entries.size >= this.maxEntries) this.#evict();
    this.#entries.set(key, { value, expiresAt });
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }

  /** Deletes every entry whose key passes `test`. */
  deleteWhere(test: (key: K) => boolean): void {
    for (const key of [...this.#entries.keys()]) if (test(key)) this.#entries.delete(key);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Drops the entry inserted first: O(1), where sweeping for expired entries would be O(n) per insert. */
  #evict(): void {
    const oldest = this.#entries.keys().next();
    if (oldest.done !== true) this.#entries.delete(oldest.value);
  }
}
