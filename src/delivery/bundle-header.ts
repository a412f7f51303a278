import { open } from "node:fs/promises";

/**
 * The header of a git bundle (gitformat-bundle): a signature line, optional capabilities (v3),
 * prerequisite commits (`-<oid> <comment>`), the refs it carries (`<oid> <refname>`), then an
 * empty line and the pack. Parsed here, in our own code, before git on the host reads any of
 * it, so a bundle that claims more than the run's one result is refused by a rule we can read.
 */
export interface BundleHeader {
  version: 2 | 3;
  prerequisites: string[];
  refs: Array<{ sha: string; name: string }>;
  /** Byte offset where the pack starts. */
  packOffset: number;
}

/** Headers are a few lines; anything longer is not a bundle the harness asked for. */
export const MAX_BUNDLE_HEADER_BYTES = 64 * 1024;

const SHA1 = /^[0-9a-f]{40}$/;

export class BundleFormatError extends Error {
  override name = "BundleFormatError";
}

export function parseBundleHeader(bytes: Uint8Array): BundleHeader {
  const window = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, MAX_BUNDLE_HEADER_BYTES));
  const end = window.indexOf("\n\n");
  if (end < 0) throw new BundleFormatError(`no end of header within ${String(MAX_BUNDLE_HEADER_BYTES)} bytes`);
  const lines = window.subarray(0, end).toString("latin1").split("\n");
  const signature = lines.shift();
  const version = signature === "# v2 git bundle" ? 2 : signature === "# v3 git bundle" ? 3 : undefined;
  if (version === undefined) throw new BundleFormatError("not a git bundle (unknown signature line)");

  const header: BundleHeader = { version, prerequisites: [], refs: [], packOffset: end + 2 };
  for (const line of lines) {
    if (version === 3 && line.startsWith("@")) {
      // Only SHA-1 repositories are supported; any other capability changes how the pack reads.
      if (line !== "@object-format=sha1")
        throw new BundleFormatError(`unsupported bundle capability ${JSON.stringify(line.slice(0, 60))}`);
      continue;
    }
    if (line.startsWith("-")) {
      const sha = line.slice(1, 41);
      if (!SHA1.test(sha)) throw new BundleFormatError("malformed prerequisite line");
      header.prerequisites.push(sha);
      continue;
    }
    const sha = line.slice(0, 40);
    const name = line.slice(41);
    if (!SHA1.test(sha) || line[40] !== " " || name === "") throw new BundleFormatError("malformed ref line");
    header.refs.push({ sha, name });
  }
  return header;
}

/** The header of the bundle at `path`, from its first `MAX_BUNDLE_HEADER_BYTES` only. */
export async function readBundleHeader(path: string): Promise<BundleHeader> {
  const file = await open(path, "r");
  try {
    const head = Buffer.alloc(MAX_BUNDLE_HEADER_BYTES);
    let length = 0;
    for (;;) {
      const { bytesRead } = await file.read(head, length, head.length - length, length);
      length += bytesRead;
      if (bytesRead === 0 || length === head.length) break;
    }
    return parseBundleHeader(head.subarray(0, length));
  } finally {
    await file.close();
  }
}
