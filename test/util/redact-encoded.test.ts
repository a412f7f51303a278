import { describe, expect, test } from "vitest";
import type { HarnessEvent } from "../../src/contracts/events.js";
import { redactingReporter } from "../../src/harness/reporters/redacting.js";
import { REDACTED, createRedactor } from "../../src/util/redact.js";
import { fakeToken } from "../helpers/fake-secrets.js";

// What the run page, journal and status comment show passes through the run's redactor: a known
// value must be masked there in the forms an agent's output prints it in, not only as typed.

const key = fakeToken("sk-ant-api03-", 80, "url-safe");
const npm = fakeToken("npm_", 36);
const redact = createRedactor([key, npm]);
const b64 = (text: string): string => Buffer.from(text).toString("base64");
const hex = (text: string): string => Buffer.from(text).toString("hex");
const hidden = (text: string, every: number, char: string): string =>
  (text.match(new RegExp(`.{1,${String(every)}}`, "g")) ?? []).join(char);

/** Every 12-character run of the value: none may survive redaction, whatever surrounds it. */
function windowsOf(value: string, length = 12): string[] {
  return Array.from({ length: value.length - length + 1 }, (_, i) => value.slice(i, i + length));
}

const cases: Array<[label: string, line: string]> = [
  ["as typed", `export ANTHROPIC_KEY_VALUE ${key}`],
  ...[0, 1, 2].map((lead): [string, string] => [
    `base64 at byte offset ${String(lead)} of a blob`,
    `blob: ${b64(`${"x".repeat(lead)}${key}!`)}`,
  ]),
  ["base64url", `jwt-ish ${Buffer.from(`{"k":"${key}"}`).toString("base64url")}`],
  ["hex", `dump ${hex(key)}`],
  ["HEX", `DUMP ${hex(key).toUpperCase()}`],
  ["reversed", `echo ${Array.from(key).reverse().join("")}`],
  [
    "URL-encoded, every byte escaped",
    `GET /?k=${[...Buffer.from(key)].map((byte) => `%${byte.toString(16).padStart(2, "0")}`).join("")}`,
  ],
  ["URL-encoded as a component", `GET /?k=${encodeURIComponent(`${key}/+=`)}`],
  // The push scan's other forms, which text can carry as written: published text is masked in them too.
  [
    "rot13",
    `echo ${key.replace(/[A-Za-z]/g, (c) => {
      const base = c <= "Z" ? 65 : 97;
      return String.fromCharCode(((c.charCodeAt(0) - base + 13) % 26) + base);
    })}`,
  ],
  [
    "base64 of UTF-16LE (PowerShell's -EncodedCommand)",
    `pwsh -enc ${Buffer.from(`$k='${key}'`, "utf16le").toString("base64")}`,
  ],
  ["hex of UTF-16LE", `dump ${Buffer.from(key, "utf16le").toString("hex")}`],
  ["a zero-width space inside", `key ${hidden(key, 9, "\u200b")}`],
  ["a word joiner and a soft hyphen inside", `key ${hidden(hidden(key, 7, "\u2060"), 13, "\u00ad")}`],
  ["bidi controls around and inside", `key \u202e${hidden(key, 20, "\u2066")}\u202c`],
];

describe("createRedactor: a known value in the forms output prints it in", () => {
  test.each(cases)("%s", (_label, line) => {
    const shown = redact(line);
    expect(shown).toContain(REDACTED);
    const visible = shown.replace(/[\u200b\u2060\u00ad\u202e\u2066\u202c]/g, "");
    for (const piece of windowsOf(key)) {
      expect(visible).not.toContain(piece);
      expect(visible).not.toContain(hex(piece));
      expect(visible).not.toContain(Array.from(piece).reverse().join(""));
    }
  });

  test("text without a secret keeps its hidden characters (emoji sequences, bidi text)", () => {
    const text = "done 👩‍💻 ✓ — \u202bمرحبا\u202c soft\u00adhyphen, zero\u200bwidth";
    expect(redact(text)).toBe(text);
  });

  test("short values are masked as typed only: their encodings are too short to tell from chance", () => {
    const short = createRedactor(["abc123"]);
    expect(short("id abc123 and 616263313233")).toBe(`id ${REDACTED} and 616263313233`);
  });

  test("every event a reporter is given, as the run page, journal and status comment get it", () => {
    const seen: HarnessEvent[] = [];
    const reporter = redactingReporter({ emit: (event) => seen.push(event) }, redact);
    const npmrc = b64(`//registry.npmjs.org/:_authToken=${npm}\n`);
    const reversedKey = Array.from(key).reverse().join("");
    reporter.emit({
      type: "node.output",
      runId: "r1",
      nodeId: "agent",
      attempt: 1,
      tail: `$ cat .npmrc | base64\n${npmrc}\n$ rev <<< "$KEY"\n${reversedKey}\n`,
      at: "2026-11-28T10:00:00.000Z",
    });
    const shown = JSON.stringify(seen);
    // The token's bytes are base64 characters 44 to 92 of the blob.
    expect(shown).not.toContain(npmrc.slice(48, 88));
    for (const piece of windowsOf(reversedKey)) expect(shown).not.toContain(piece);
    expect(shown).toContain("$ cat .npmrc | base64");
  });
});
