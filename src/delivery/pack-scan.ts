import { createReadStream } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { createInflate, inflateSync } from "node:zlib";
import { formatSize } from "./result-objects.js";

/**
 * The sizes a bundle's pack declares, read by our own code before git indexes it. Indexing
 * must build every object to hash it, and a delta builds its result whole in memory: a few
 * hundred bytes of copy instructions can declare a gigabyte (`git index-pack` then holds that
 * gigabyte). So each entry's header and, for a delta, the result size at the start of its
 * instructions are read first, and a pack is refused if it would make git build too much.
 *
 * A plain (undeltified) blob is the exception: git hashes one over its streaming threshold as
 * it reads, never whole, so a large one is only counted here, and the later check by object,
 * which can name its file, refuses it.
 *
 * Pack format (gitformat-pack): "PACK", version, object count, then per object a header (type
 * and size, varint), for OFS_DELTA a base offset and for REF_DELTA a base id, then zlib data.
 */
export interface PackLimits {
  /** Largest object git would hold whole: any delta's result, any commit, tree or tag. */
  maxObjectBytes: number;
  /** Most bytes the pack's objects may inflate to, together (bounds the work of reading it). */
  maxInflatedBytes: number;
  /** Most objects in the pack. */
  maxObjects: number;
}

const OBJ_COMMIT = 1;
const OBJ_TREE = 2;
const OBJ_BLOB = 3;
const OBJ_TAG = 4;
const OBJ_OFS_DELTA = 6;
const OBJ_REF_DELTA = 7;
const TRAILER_BYTES = 20;
/** Longest entry header: type and size (10 bytes for 64 bits), then a base offset or a 20-byte id. */
const ENTRY_HEAD_BYTES = 32;
/** Entries up to this are inflated in one call; larger ones (plain blobs only) stream. */
const INFLATE_AT_ONCE_BYTES = 1024 * 1024;

class PackProblem extends Error {}

/** Why a pack is refused: it would make git build too much, or it is not a pack git would read. */
export interface PackRefusal {
  tooLarge: boolean;
  problem: string;
}

/**
 * Why the pack at `offset` in `path` is refused, or undefined. Holds at most one entry's data
 * (never over the object limit, or a mebibyte for a plain blob) at a time.
 */
export async function scanPack(path: string, offset: number, limits: PackLimits): Promise<PackRefusal | undefined> {
  const tooLarge = (problem: string): PackRefusal => ({ tooLarge: true, problem });
  const file = await open(path, "r");
  try {
    const end = (await file.stat()).size - TRAILER_BYTES;
    const head = await readAt(file, offset, 12);
    if (head.length < 12 || head.toString("latin1", 0, 4) !== "PACK") throw new PackProblem("no pack after the header");
    const version = head.readUInt32BE(4);
    if (version !== 2 && version !== 3) throw new PackProblem(`version ${String(version)}`);
    const count = head.readUInt32BE(8);
    if (count > limits.maxObjects)
      return tooLarge(`it holds ${String(count)} objects, more than the ${String(limits.maxObjects)} accepted`);

    let position = offset + 12;
    let inflated = 0;
    for (let index = 0; index < count; index++) {
      const entry = parseEntryHead(await readAt(file, position, Math.min(ENTRY_HEAD_BYTES, end - position)));
      position += entry.headBytes;
      const delta = entry.type === OBJ_OFS_DELTA || entry.type === OBJ_REF_DELTA;
      if (entry.type !== OBJ_BLOB && entry.size > limits.maxObjectBytes)
        return tooLarge(
          `it holds ${delta ? "a delta" : "an object"} of ${formatSize(entry.size)}, ` +
            `over the ${formatSize(limits.maxObjectBytes)} limit for one object`,
        );
      if (!delta && inflated + entry.size > limits.maxInflatedBytes)
        return tooLarge(`its objects come to more than ${formatSize(limits.maxInflatedBytes)}`);

      if (entry.type === OBJ_BLOB && entry.size > INFLATE_AT_ONCE_BYTES) {
        // A plain blob: git streams it too, so its bytes are counted here, never kept.
        position += await inflatedLength(path, position, end, entry.size);
        inflated += entry.size;
      } else {
        const window = await readAt(file, position, Math.min(end - position, deflatedBound(entry.size)));
        let result: { buffer: Buffer; engine: { bytesWritten: number } };
        try {
          result = inflateSync(window, { info: true, maxOutputLength: Math.max(entry.size, 1) }) as unknown as {
            buffer: Buffer;
            engine: { bytesWritten: number };
          };
        } catch {
          throw new PackProblem("an object's data does not match its size");
        }
        if (result.buffer.length !== entry.size) throw new PackProblem("an object's data does not match its size");
        position += result.engine.bytesWritten;
        if (delta) {
          const resultSize = deltaResultSize(result.buffer);
          if (resultSize > limits.maxObjectBytes)
            return tooLarge(
              `it holds a delta that builds an object of ${formatSize(resultSize)}, ` +
                `over the ${formatSize(limits.maxObjectBytes)} limit for one object`,
            );
          inflated += resultSize;
        } else {
          inflated += entry.size;
        }
      }
      if (inflated > limits.maxInflatedBytes)
        return tooLarge(`its objects come to more than ${formatSize(limits.maxInflatedBytes)}`);
    }
    return undefined;
  } catch (error) {
    if (error instanceof PackProblem) return { tooLarge: false, problem: `its pack is malformed (${error.message})` };
    throw error;
  } finally {
    await file.close();
  }
}

function parseEntryHead(bytes: Buffer): { type: number; size: number; headBytes: number } {
  let at = 0;
  const byte = (): number => {
    const value = bytes[at++];
    if (value === undefined) throw new PackProblem("an object header runs past the pack");
    return value;
  };
  let c = byte();
  const type = (c >> 4) & 7;
  let size = c & 15;
  let scale = 16;
  while (c & 0x80) {
    c = byte();
    size += (c & 0x7f) * scale;
    scale *= 128;
    if (size > Number.MAX_SAFE_INTEGER) throw new PackProblem("an object's size is out of range");
  }
  if (type === OBJ_OFS_DELTA) {
    do c = byte();
    while (c & 0x80);
  } else if (type === OBJ_REF_DELTA) {
    at += 20;
    if (at > bytes.length) throw new PackProblem("an object header runs past the pack");
  } else if (![OBJ_COMMIT, OBJ_TREE, OBJ_BLOB, OBJ_TAG].includes(type)) {
    throw new PackProblem(`an object has the unknown type ${String(type)}`);
  }
  return { type, size, headBytes: at };
}

/** A delta starts with two varints: its base's size, then its result's. */
function deltaResultSize(delta: Buffer): number {
  let at = 0;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const c = delta[at++];
      if (c === undefined) throw new PackProblem("a delta is cut short");
      value += (c & 0x7f) * scale;
      scale *= 128;
      if (value > Number.MAX_SAFE_INTEGER) throw new PackProblem("a delta's size is out of range");
      if (!(c & 0x80)) return value;
    }
  };
  varint();
  return varint();
}

/** Above what zlib can take to hold `size` bytes (deflateBound, with room to spare). */
function deflatedBound(size: number): number {
  return size + Math.ceil(size / 1024) + 64;
}

/** Inflates the zlib stream at `start`, counting and dropping its output; resolves to its compressed length. */
function inflatedLength(path: string, start: number, end: number, size: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const source = createReadStream(path, { start, end: Math.max(start, end - 1) });
    const inflate = createInflate();
    let produced = 0;
    const fail = (): void => {
      source.destroy();
      inflate.destroy();
      reject(new PackProblem("an object's data does not match its size"));
    };
    inflate.on("data", (chunk: Buffer) => {
      produced += chunk.length;
      if (produced > size) fail();
    });
    inflate.on("end", () => {
      source.destroy();
      if (produced !== size) fail();
      else resolve(inflate.bytesWritten);
    });
    inflate.on("error", fail);
    source.on("error", fail);
    source.pipe(inflate);
  });
}

async function readAt(file: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(Math.max(0, length));
  let filled = 0;
  while (filled < buffer.length) {
    const { bytesRead } = await file.read(buffer, filled, buffer.length - filled, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}
