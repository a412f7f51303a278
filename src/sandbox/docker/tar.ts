/**
 * A minimal tar (ustar) writer for the few small files the harness puts into a container with
 * the engine's archive API (scratch files, their folder): each entry names its owner, group and
 * mode exactly, and the engine's extraction applies them as given.
 */
export interface TarEntry {
  /** Relative path inside the archive; at most 100 bytes (scratch names are far shorter). */
  name: string;
  type: "file" | "directory";
  mode: number;
  uid: number;
  gid: number;
  content?: Buffer;
}

const BLOCK = 512;

export function tarArchive(entries: readonly TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const content = entry.type === "file" ? (entry.content ?? Buffer.alloc(0)) : Buffer.alloc(0);
    parts.push(header(entry, content.length));
    if (content.length > 0) {
      parts.push(content);
      const pad = (BLOCK - (content.length % BLOCK)) % BLOCK;
      if (pad > 0) parts.push(Buffer.alloc(pad));
    }
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

function header(entry: TarEntry, size: number): Buffer {
  const name = entry.type === "directory" && !entry.name.endsWith("/") ? `${entry.name}/` : entry.name;
  if (Buffer.byteLength(name) > 100) throw new RangeError(`tar entry name too long: ${name}`);
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, "utf8");
  octal(block, 100, 8, entry.mode);
  octal(block, 108, 8, entry.uid);
  octal(block, 116, 8, entry.gid);
  octal(block, 124, 12, size);
  octal(block, 136, 12, Math.floor(Date.now() / 1000));
  block.fill(" ", 148, 156);
  block.write(entry.type === "directory" ? "5" : "0", 156, 1, "ascii");
  block.write("ustar\u000000", 257, 8, "ascii");
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\u0000 `, 148, 8, "ascii");
  return block;
}

function octal(block: Buffer, offset: number, length: number, value: number): void {
  block.write(`${value.toString(8).padStart(length - 1, "0")}\u0000`, offset, length, "ascii");
}
