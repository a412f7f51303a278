import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateSync, gzipSync } from "node:zlib";
import { afterAll, describe, expect, test } from "vitest";
import { maskSecrets, scanForSecrets, type KnownSecret } from "../../src/delivery/secret-scan.js";
import { fakeToken } from "../helpers/fake-secrets.js";

/*
 * The ways an agent (or a prompt-injected one) can write a registered key so that the text no
 * longer holds it as typed. Each must still stop the push.
 */

const key = fakeToken("sk-ant-api03-", 80, "url-safe");
const NAME = "ANTHROPIC_API_KEY";
const SECRETS: KnownSecret[] = [{ name: NAME, value: key }];

/** One new file's part of `git diff -U0` output. */
function newFile(path: string, lines: readonly string[]): string {
  return (
    `diff --git a/${path} b/${path}\nnew file mode 100644\nindex 0000000..3b18e51\n--- /dev/null\n+++ b/${path}\n` +
    `@@ -0,0 +1,${String(lines.length)} @@\n${lines.map((line) => `+${line}\n`).join("")}`
  );
}

/** Bytes as `git diff --text` output reaches the scan: read as UTF-8 (so NULs stay, bad bytes become U+FFFD). */
const asDiffText = (bytes: Buffer): string => bytes.toString("utf8");
const utf16be = (text: string): Buffer => Buffer.from(text, "utf16le").swap16();
const codes = (text: string): number[] => Array.from(text).map((char) => char.codePointAt(0) ?? 0);
const hidden = (text: string, every: number, char: string): string =>
  (text.match(new RegExp(`.{1,${String(every)}}`, "g")) ?? []).join(char);
const wrap = (text: string, width: number): string[] => text.match(new RegExp(`.{1,${String(width)}}`, "g")) ?? [];
const b64 = (bytes: Buffer | string): string => Buffer.from(bytes).toString("base64");
const fullwidth = (text: string): string =>
  text.replace(/[!-~]/g, (char) => String.fromCharCode(char.charCodeAt(0) + 0xfee0));
const tags = (text: string): string =>
  Array.from(text)
    .map((char) => String.fromCodePoint(0xe0000 + char.charCodeAt(0)))
    .join("");
const cyrillic = (text: string): string =>
  text.replace(/[aeopcxyAEKMHOPCTX]/g, (char) => "аеорсхуАЕКМНОРСТХ".charAt("aeopcxyAEKMHOPCTX".indexOf(char)));
const rot13 = (text: string): string =>
  text.replace(/[A-Za-z]/g, (char) => {
    const base = char <= "Z" ? 65 : 97;
    return String.fromCharCode(((char.charCodeAt(0) - base + 13) % 26) + base);
  });
function base32(bytes: Buffer): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const byte of bytes) bits += byte.toString(2).padStart(8, "0");
  return (bits.match(/.{1,5}/g) ?? []).map((group) => alphabet.charAt(parseInt(group.padEnd(5, "0"), 2))).join("");
}

const half = Math.floor(key.length / 2);
const third = Math.floor(key.length / 3);

/** [what, the diff]: each holds the key written one way. */
const encodings: Array<[string, string]> = [
  ["as typed", newFile("a.env", [`KEY=${key}`])],
  ["UTF-16LE with a byte order mark", newFile("k.txt", [asDiffText(Buffer.from(`\ufeffKEY=${key}`, "utf16le"))])],
  ["UTF-16LE without one", newFile("k.txt", [asDiffText(Buffer.from(`KEY=${key}`, "utf16le"))])],
  ["UTF-16BE with a byte order mark", newFile("k.txt", [asDiffText(utf16be(`\ufeffKEY=${key}`))])],
  ["UTF-16BE without one", newFile("k.txt", [asDiffText(utf16be(`KEY=${key}`))])],
  ["a zero-width space every 7 characters", newFile("k.ts", [`const k = "${hidden(key, 7, "\u200b")}";`])],
  [
    "soft hyphens, word joiners and byte order marks mixed in",
    newFile("k.ts", [`const k = "${hidden(hidden(hidden(key, 5, "\u00ad"), 11, "\u2060"), 17, "\ufeff")}";`]),
  ],
  ["bidi controls inside", newFile("k.md", [`key: \u202e${hidden(key, 9, "\u2066\u2069")}\u202c`])],
  [
    "halves in two files, the second half in the file listed first",
    newFile("a/second.txt", [key.slice(half)]) + newFile("z/first.txt", [key.slice(0, half)]),
  ],
  [
    "thirds in three files",
    newFile("one.txt", [key.slice(0, third)]) +
      newFile("two.txt", [key.slice(third, 2 * third)]) +
      newFile("three.txt", [key.slice(2 * third)]),
  ],
  ["reversed", newFile("k.txt", [Array.from(key).reverse().join("")])],
  ["gzip, then base64", newFile("blob.txt", [b64(gzipSync(`KEY=${key}\n`))])],
  ["zlib (deflate), then base64", newFile("blob.txt", [b64(deflateSync(key))])],
  [
    "gzip, then base64 wrapped at 76 columns in a string concatenation",
    newFile(
      "blob.js",
      ["const blob =", ...wrap(b64(gzipSync(`{"key":"${key}"}`)), 76).map((line) => `  "${line}" +`), '  "";'].map(
        String,
      ),
    ),
  ],
  ["gzip after a word, in JSON", newFile("data.json", [`{"data": "payload ${b64(gzipSync(key))}"}`])],
  ["gzip, then hex", newFile("blob.txt", [`hex:${gzipSync(key).toString("hex")}`])],
  ["base64 of base64", newFile("b.txt", [b64(b64(`token=${key}`))])],
  ["base64 of gzip of base64", newFile("b.txt", [b64(gzipSync(b64(key)))])],
  [
    "base64 of UTF-16LE (PowerShell -EncodedCommand)",
    newFile("run.ps1", [`pwsh -e ${b64(Buffer.from(`$k="${key}"`, "utf16le"))}`]),
  ],
  ["hex of UTF-16LE", newFile("k.txt", [Buffer.from(key, "utf16le").toString("hex")])],
  ["base32", newFile("k.txt", [base32(Buffer.from(`x${key}`))])],
  ["rot13", newFile("k.txt", [rot13(key)])],
  ["decimal character codes", newFile("k.js", [`String.fromCharCode(${codes(key).join(", ")})`])],
  ["a JSON array of character codes", newFile("k.json", [`[${codes(key).join(",")}]`])],
  [
    "hex character codes",
    newFile("k.py", [
      `bytes([${codes(key)
        .map((c) => `0x${c.toString(16)}`)
        .join(", ")}])`,
    ]),
  ],
  [
    "\\x escapes",
    newFile("k.c", [
      `char k[] = "${codes(key)
        .map((c) => `\\x${c.toString(16)}`)
        .join("")}";`,
    ]),
  ],
  [
    "\\u escapes",
    newFile("k.js", [
      `"${codes(key)
        .map((c) => `\\u${c.toString(16).padStart(4, "0")}`)
        .join("")}"`,
    ]),
  ],
  [
    "octal escapes",
    newFile("k.sh", [
      `printf '${codes(key)
        .map((c) => `\\${c.toString(8)}`)
        .join("")}'`,
    ]),
  ],
  [
    "HTML entities",
    newFile("k.html", [
      `<p>${codes(key)
        .map((c) => `&#${String(c)};`)
        .join("")}</p>`,
    ]),
  ],
  [
    "every byte %-escaped",
    newFile("k.txt", [
      `?k=${codes(key)
        .map((c) => `%${c.toString(16).toUpperCase()}`)
        .join("")}`,
    ]),
  ],
  ["fullwidth letters", newFile("k.txt", [fullwidth(key)])],
  ["Cyrillic lookalikes", newFile("k.txt", [cyrillic(key)])],
  ["invisible tag characters", newFile("README.md", [`Nothing to see here.${tags(key)}`])],
];

describe("scanForSecrets: a registered key written so the text no longer holds it", () => {
  test.each(encodings)("%s", (_label, patch) => {
    const findings = scanForSecrets({ patch, messages: [], secrets: SECRETS });
    // Every file that holds some of it is named, under the key's name.
    const files = [...patch.matchAll(/^\+\+\+ b\/(.+)$/gm)].map((match) => match[1]);
    const named = findings.filter((finding) => finding.kind.startsWith(NAME)).map((finding) => finding.file);
    expect(new Set(named)).toEqual(new Set(files));
    // Masking what was found leaves nothing to find.
    expect(scanForSecrets({ patch: maskSecrets(patch, SECRETS), messages: [], secrets: SECRETS })).toEqual([]);
  });

  test("in a commit message too", () => {
    const findings = scanForSecrets({
      patch: "",
      messages: [`Add the fixture\n\n${b64(gzipSync(key))}\n`],
      secrets: SECRETS,
    });
    expect(findings).toEqual([
      { where: "commit message", message: 0, line: 3, kind: `${NAME} (gzip-compressed, base64-encoded)` },
    ]);
  });

  test("findings say how it was written", () => {
    const kinds = (patch: string): string[] =>
      scanForSecrets({ patch, messages: [], secrets: SECRETS }).map((finding) => finding.kind);
    expect(kinds(newFile("a.txt", [b64(gzipSync(key))]))).toEqual([`${NAME} (gzip-compressed, base64-encoded)`]);
    expect(kinds(newFile("a.txt", [Array.from(key).reverse().join("")]))).toEqual([`${NAME} (reversed)`]);
    expect(kinds(newFile("a.txt", [hidden(key, 3, "\u200b")]))).toEqual([NAME]);
    // The first half still has an Anthropic key's shape, and is reported as one too.
    expect(kinds(newFile("a.txt", [key.slice(0, half)]) + newFile("b.txt", [key.slice(half)]))).toEqual([
      "Anthropic API key",
      `${NAME} (a part of it)`,
      `${NAME} (a part of it)`,
    ]);
  });

  test("a token of a well-known shape inside gzip and base64, never registered", () => {
    const token = fakeToken("ghp_");
    const findings = scanForSecrets({
      patch: newFile("a.txt", [b64(gzipSync(`t=${token}`))]),
      messages: [],
      secrets: [],
    });
    expect(findings).toEqual([
      { where: "diff", file: "a.txt", line: 1, kind: "GitHub token (gzip-compressed, base64-encoded)" },
    ]);
  });

  test("compressed data that inflates past the budget refuses the push rather than going unread", () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
    const findings = scanForSecrets({ patch: newFile("bomb.txt", [b64(bomb)]), messages: [], secrets: SECRETS });
    expect(findings).toEqual([
      { where: "diff", file: "bomb.txt", line: 1, kind: "more encoded or compressed data than Harness can check" },
    ]);
  });
});

describe("maskSecrets: what decoding finds is masked where it is written", () => {
  test("a wrapped gzip blob is masked line by line; the lines around it and the line count stay", () => {
    const lines = wrap(b64(gzipSync(`{"key":"${key}"}`)), 20);
    const patch = newFile("blob.txt", ["before", ...lines, "", "after: plain text"]);
    const masked = maskSecrets(patch, SECRETS);
    expect(masked.split("\n")).toHaveLength(patch.split("\n").length);
    expect(masked).toContain("+before\n");
    expect(masked).toContain("+after: plain text\n");
    for (const line of lines) expect(masked).not.toContain(line);
  });

  test("each half of a value split over two files is masked", () => {
    const patch = newFile("a.txt", [`first=${key.slice(0, half)}`]) + newFile("b.txt", [`second=${key.slice(half)}`]);
    const masked = maskSecrets(patch, SECRETS);
    expect(masked).toContain("+second=[REDACTED]");
    expect(masked).not.toContain(key.slice(half));
    expect(masked).not.toContain(key.slice(20, half));
  });
});

describe("scanForSecrets: UTF-16 through real git", () => {
  const dir = mkdtempSync(join(tmpdir(), "harness-scan-utf16-"));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  test("a UTF-16LE file with a byte order mark, as `git diff --text` writes it", () => {
    const git = (...args: string[]): string =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
        cwd: dir,
        encoding: "utf8",
        env: { PATH: process.env["PATH"] ?? "", HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
      });
    git("init", "-q");
    git("commit", "-q", "--allow-empty", "-m", "base");
    writeFileSync(
      join(dir, "settings.reg"),
      Buffer.from(`\ufeffWindows Registry Editor\r\n"Key"="${key}"\r\n`, "utf16le"),
    );
    git("add", "settings.reg");
    git("commit", "-q", "-m", "add");
    const patch = git("diff", "--no-color", "--text", "-U0", "HEAD~1", "HEAD");
    expect(patch).toContain("\0");
    expect(scanForSecrets({ patch, messages: [], secrets: SECRETS })).toEqual([
      { where: "diff", file: "settings.reg", line: 2, kind: NAME },
    ]);
  });
});

describe("scanForSecrets: an ordinary change holds none of this", () => {
  const secrets: KnownSecret[] = [
    ...SECRETS,
    { name: "GITHUB_TOKEN", value: fakeToken("ghs_") },
    { name: "WEBHOOK_SECRET", value: randomBytes(20).toString("hex") },
    { name: "SESSION_SECRET", value: randomBytes(32).toString("base64") },
    { name: "NPM_TOKEN", value: fakeToken("npm_", 36) },
  ];

  test("code, prose in several scripts, emoji, lockfile hashes, images, compressed fixtures and UTF-16", () => {
    const patch =
      newFile("src/i18n/messages.ts", [
        "export const messages = {",
        '  greeting: "Привет, мир! Ελληνικά κείμενα. こんにちは世界",',
        '  team: "👩‍💻👨‍👩‍👧 family ✈️ flags 🇫🇷",',
        '  rtl: "\u202bمرحبا\u202c",',
        '  nbsp: "10\u00a0km — soft\u00adhyphen",',
        "};",
      ]) +
      newFile("package-lock.json", [
        '    "node_modules/zod": {',
        '      "version": "3.23.8",',
        `      "integrity": "sha512-${randomBytes(64).toString("base64")}"`,
        "    }",
      ]) +
      newFile("assets/logo.svg", [
        `<image href="data:image/png;base64,${b64(randomBytes(3000))}" />`,
        `<image href="data:image/png;base64,${b64(gzipSync(randomBytes(2000)))}" />`,
      ]) +
      newFile(
        "test/fixtures/events.json.gz.b64",
        wrap(b64(gzipSync('{"events":[1,2,3],"token":"none"}'.repeat(50))), 76),
      ) +
      newFile("test/fixtures/config.zlib.hex", [deflateSync("key = value\nretries = 3\n".repeat(20)).toString("hex")]) +
      newFile("docs/windows.reg", [asDiffText(Buffer.from("\ufeffWindows Registry Editor Version 5.00", "utf16le"))]) +
      newFile("src/crypto.ts", [
        `const digest = "${randomBytes(32).toString("hex")}";`,
        `const commit = "${randomBytes(20).toString("hex")}";`,
        `const codes = [${codes("hello, world").join(", ")}];`,
        'const reversedWords = "olleh dlrow";',
        "export const isEmpty = (s: string): boolean => s.length === 0;",
        `const uuid = "${[8, 4, 4, 4, 12].map((n) => randomBytes(n / 2).toString("hex")).join("-")}";`,
        "const minified=function(n){return n.map(function(e){return e.id}).filter(Boolean)};",
      ]);
    expect(scanForSecrets({ patch, messages: ["Add translations\n\nAnd the fixtures they use."], secrets })).toEqual(
      [],
    );
  });
});
