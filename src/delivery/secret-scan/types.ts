/* What the secret scan is given and what it reports (src/delivery/secret-scan.ts). */

export interface KnownSecret {
  name: string;
  value: string;
}

export interface SecretFinding {
  where: "diff" | "commit message";
  /** Path from the diff header (b/ side), for `where === "diff"`; masked if it holds a secret itself. */
  file?: string;
  /** 1-based line in the new file (for a commit message: in that message), when known. */
  line?: number;
  /** For `where === "commit message"`: the index of the message in the `messages` given. */
  message?: number;
  /** What was found, e.g. "ANTHROPIC_API_KEY (base64-encoded)" or "GitHub token". Never the value. */
  kind: string;
}

export interface SecretScanInput {
  /** `git diff -U0 <base> <new>` output: only added lines (and new paths) are being pushed. */
  patch: string;
  /** Commit messages: all of their text is pushed. */
  messages: readonly string[];
  secrets: readonly KnownSecret[];
}
