import type { Sandbox } from "../sandbox/types.js";

/** A named sandbox as `list` shows it. */
export interface NamedSandboxInfo {
  name: string;
  provider: "local" | "docker";
  /** `stopped`: the container exited (its machine restarted, say); only deleting it is left. */
  state: "running" | "paused" | "stopped";
  /** The repository it was made from, as given. */
  repo: string | undefined;
  branch: string;
  /** ISO-8601. */
  createdAt: string | undefined;
  /** Docker: the image it runs. */
  image?: string;
}

/** What a provider needs to make a named sandbox. */
export interface NamedSandboxSpec {
  name: string;
  /** A local path or a GitHub repository (`owner/name`, an https URL). */
  repo: string;
  branch: string;
  labels: Record<string, string>;
  /** Docker: the image; refused by providers without images. */
  image?: string;
  githubServerUrl?: string;
}

/**
 * Where named sandboxes live. A provider whose sandboxes outlive the process (Docker) finds them
 * again by name; the local one keeps them only as long as the process that made them.
 */
export interface NamedSandboxProvider {
  readonly kind: NamedSandboxInfo["provider"];
  create(spec: NamedSandboxSpec): Promise<Sandbox>;
  /** The sandbox of that name, or undefined when this provider has none. */
  open(name: string): Promise<Sandbox | undefined>;
  list(): Promise<NamedSandboxInfo[]>;
  /** Reads back what `rememberBase` recorded for the sandbox, or undefined. */
  readBase(sandbox: Sandbox): Promise<string | undefined>;
  rememberBase(sandbox: Sandbox, base: string): Promise<void>;
  /** Deletes the sandbox of that name, whatever its state; false when this provider has none. */
  remove(name: string): Promise<boolean>;
  /** Told when the manager paused or resumed one, for providers that cannot ask their sandboxes. */
  noteState?(name: string, state: "running" | "paused"): void;
  /** Releases the provider's client; sandboxes that outlive the process stay. */
  close(): Promise<void>;
}
