import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { parseBundleHeader } from "../../src/delivery/bundle-header.js";
import { scanPack, type PackLimits } from "../../src/delivery/pack-scan.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";

/*
 * The pack's own headers, read before git indexes it, on bundles real git made: every entry
 * must be walked exactly (a wrong length would misread the next one), so ordinary bundles —
 * deltas within the pack, deltas against the base (a thin pack), large plain blobs that stream
 * — must pass, and each limit must bite where it says.
 */

const MiB = 1024 * 1024;
const generous: PackLimits = { maxObjectBytes: 16 * MiB, maxInflatedBytes: 2048 * MiB, maxObjects: 1_000_000 };

let root: { path: string; cleanup: () => Promise<void> };
let work: string;
let base: string;

beforeEach(async () => {
  root = await scratchDir("harness-pack-scan-");
  work = await makeRepo(join(root.path, "work"));
  const lines = Array.from({ length: 3000 }, () => randomBytes(16).toString("hex")).join("\n");
  await writeFile(join(work, "big.txt"), `${lines}\n`);
  git(work, "add", "big.txt");
  git(work, "commit", "--quiet", "-m", "base");
  base = git(work, "rev-parse", "HEAD");
});

afterEach(async () => {
  await root.cleanup();
});

/** Bundles `HEAD` less the base; returns its path and where its pack starts. */
async function bundle(): Promise<{ path: string; packOffset: number }> {
  const path = join(root.path, `b-${String(Math.random()).slice(2)}.bundle`);
  git(work, "bundle", "create", "--quiet", path, "HEAD", `^${base}`);
  return { path, packOffset: parseBundleHeader(await readFile(path)).packOffset };
}

async function commitFiles(files: Record<string, string | Buffer>): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    await writeFile(join(work, name), content);
    git(work, "add", name);
  }
  git(work, "commit", "--quiet", "-m", "change");
}

describe("scanPack", () => {
  test("walks ordinary bundles to the end: deltas in the pack, deltas on the base, a streamed blob", async () => {
    const big = await readFile(join(work, "big.txt"), "utf8");
    await commitFiles({ "big.txt": `${big}one more\n`, "copy.txt": `${big}another\n` });
    await commitFiles({ "copy.txt": `${big}another, again\n`, "noise.bin": randomBytes(3 * MiB) });
    const { path, packOffset } = await bundle();
    expect(await scanPack(path, packOffset, generous)).toBeUndefined();
  });

  test("refuses more objects than allowed", async () => {
    await commitFiles({ "a.txt": "a\n", "b.txt": "b\n" });
    const { path, packOffset } = await bundle();
    expect(await scanPack(path, packOffset, { ...generous, maxObjects: 3 })).toEqual({
      tooLarge: true,
      problem: "it holds 4 objects, more than the 3 accepted",
    });
  });

  test("counts a large plain blob towards the inflated total without holding it", async () => {
    await commitFiles({ "noise.bin": randomBytes(5 * MiB) });
    const { path, packOffset } = await bundle();
    expect(await scanPack(path, packOffset, { ...generous, maxInflatedBytes: 4 * MiB })).toEqual({
      tooLarge: true,
      problem: "its objects come to more than 4 MiB",
    });
    expect(await scanPack(path, packOffset, { ...generous, maxInflatedBytes: 6 * MiB })).toBeUndefined();
  });

  test("refuses a tree over the object limit", async () => {
    await commitFiles(Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`file-${String(i)}.txt`, "x\n"])));
    const { path, packOffset } = await bundle();
    const refusal = await scanPack(path, packOffset, { ...generous, maxObjectBytes: 4096 });
    expect(refusal).toMatchObject({ tooLarge: true });
    expect(refusal?.problem).toMatch(/^it holds an object of [\d.]+ KiB, over the 4 KiB limit for one object$/);
  });

  test("calls a cut or garbled pack malformed", async () => {
    await commitFiles({ "a.txt": "a\n".repeat(500), "noise.bin": randomBytes(2 * MiB) });
    const { path, packOffset } = await bundle();
    const bytes = await readFile(path);
    await writeFile(path, bytes.subarray(0, packOffset + Math.floor((bytes.length - packOffset) / 2)));
    expect(await scanPack(path, packOffset, generous)).toMatchObject({ tooLarge: false });
    expect((await scanPack(path, packOffset, generous))?.problem).toMatch(/^its pack is malformed/);
    await writeFile(path, Buffer.concat([bytes.subarray(0, packOffset), Buffer.from("NOT A PACK AT ALL")]));
    expect((await scanPack(path, packOffset, generous))?.problem).toMatch(/^its pack is malformed/);
  });
});
