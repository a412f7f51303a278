import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { MAX_OUTPUT_BYTES, truncate } from "../../src/util/sanitize.js";
import { TailBuffer } from "../../src/util/tail-buffer.js";

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

describe("truncate", () => {
  test("leaves text within the limit untouched", () => {
    expect(truncate("hello", 5)).toBe("hello");
    expect(truncate("", 0)).toBe("");
  });

  test("keeps the tail and says how much was cut", () => {
    const log = `${"noise\n".repeat(1000)}Error: the real failure`;
    const out = truncate(log, 100);
    expect(out.endsWith("Error: the real failure")).toBe(true);
    expect(bytes(out)).toBeLessThanOrEqual(100);
    const cut = Number(/\[… (\d+) bytes truncated …\]/.exec(out)?.[1]);
    expect(cut).toBe(bytes(log) - bytes(out.slice(out.indexOf("\n") + 1)));
  });

  test("counts bytes, not UTF-16 units, on multi-byte text", () => {
    const text = "é".repeat(100); // 200 bytes
    const out = truncate(text, 101);
    expect(bytes(out)).toBeLessThanOrEqual(101);
    expect(out).not.toContain("\uFFFD");
  });

  test("a limit smaller than the marker still returns at most the limit", () => {
    expect(bytes(truncate("abcdefghij".repeat(10), 3))).toBeLessThanOrEqual(3);
    expect(truncate("abcdefghij".repeat(10), 3)).toBe("hij");
  });

  test("defaults to 1 MiB", () => {
    expect(MAX_OUTPUT_BYTES).toBe(1_048_576);
    expect(bytes(truncate("x".repeat(MAX_OUTPUT_BYTES + 10)))).toBeLessThanOrEqual(MAX_OUTPUT_BYTES);
  });

  test("rejects a negative limit", () => {
    expect(() => truncate("x", -1)).toThrow(RangeError);
  });

  test("property: never more than the limit, never a split code point, always the true tail", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 400 }), fc.nat({ max: 300 }), (text, max) => {
        const out = truncate(text, max);
        expect(bytes(out)).toBeLessThanOrEqual(max);
        if (bytes(text) <= max) {
          expect(out).toBe(text);
        } else {
          const tail = Buffer.from(out.includes("…]\n") ? out.slice(out.indexOf("…]\n") + 3) : out, "utf8");
          // The tail's bytes are exactly the input's last bytes: had a code point been split,
          // decoding would have turned its stray bytes into U+FFFD and the bytes would differ.
          const input = Buffer.from(text, "utf8");
          expect(input.subarray(input.length - tail.length).equals(tail)).toBe(true);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe("TailBuffer", () => {
  test("holds a bounded tail of a long stream and renders it like truncate", () => {
    const buffer = new TailBuffer(64);
    let all = "";
    for (let i = 0; i < 10_000; i++) {
      const line = `line ${String(i)}\n`;
      all += line;
      buffer.push(Buffer.from(line));
    }
    expect(buffer.truncated).toBe(true);
    expect(buffer.totalBytes).toBe(bytes(all));
    expect(buffer.text()).toBe(truncate(all, 64));
  });

  test("one oversized chunk is cut down to its tail", () => {
    const buffer = new TailBuffer(10);
    buffer.push(Buffer.from("a".repeat(1000) + "0123456789"));
    expect(buffer.text().endsWith("6789")).toBe(true);
    expect(bytes(buffer.text())).toBeLessThanOrEqual(10);
  });
});
