/*
 * The ways a known secret can be written so that its text no longer contains the value, each a
 * fixed string that can be searched for: encodings that map the value to one output whatever
 * surrounds it. (Encodings whose output depends on the data around it, like compression, have to
 * be decoded instead; the push scan does that.)
 */

/** `[label, form]`: the label names the encoding in a finding, e.g. "base64-encoded". */
export type SecretForm = readonly [label: string, form: string];

/**
 * The forms a tool or an agent most often prints a value in (base64 at any offset of a larger
 * blob, hex, URL-encoded, reversed): the start of both the push scan's and the redactor's lists.
 */
export function everydayForms(value: string): SecretForm[] {
  const bytes = Buffer.from(value, "utf8");
  const hex = bytes.toString("hex");
  return [
    ...base64Cores(bytes).map((form): SecretForm => ["base64-encoded", form]),
    ["hex-encoded", hex],
    ["hex-encoded", hex.toUpperCase()],
    ...urlEncodings(value).map((form): SecretForm => ["URL-encoded", form]),
    ["reversed", reversed(value)],
  ];
}

/**
 * The forms published text is masked in (comments, PR text, run pages, journals, logs, the
 * audit export): every form the push scan searches for that appears in text as written. The
 * character-code lists are left to the push scan, which matches them with their joiners
 * (spaces, commas, backslashes) removed; written text keeps them.
 */
export function publishedForms(value: string): SecretForm[] {
  return encodedForms(value).filter(([label]) => label !== "" && label !== "as character codes");
}

/** Every form the push scan searches for, the plain value first. */
export function encodedForms(value: string): SecretForm[] {
  const forms: SecretForm[] = [
    ["", value],
    // As a JSON or shell string a multi-line value (a PEM key) has `\n` for its line breaks.
    ["", JSON.stringify(value).slice(1, -1)],
  ];
  forms.push(...everydayForms(value));
  forms.push(["rot13", rot13(value)]);
  const bytes = Buffer.from(value, "utf8");
  for (const core of base32Cores(bytes)) forms.push(["base32-encoded", core], ["base32-encoded", core.toLowerCase()]);
  // Windows tools write UTF-16 (PowerShell's -EncodedCommand is base64 of UTF-16LE).
  for (const [label, utf16] of [
    ["UTF-16LE", Buffer.from(value, "utf16le")],
    ["UTF-16BE", Buffer.from(value, "utf16le").swap16()],
  ] as const) {
    const hex = utf16.toString("hex");
    forms.push([`hex-encoded ${label}`, hex], [`hex-encoded ${label}`, hex.toUpperCase()]);
    for (const core of base64Cores(utf16)) forms.push([`base64-encoded ${label}`, core]);
  }
  for (const form of characterCodeForms(value)) forms.push(["as character codes", form]);
  return forms;
}

/*
 * Inside a larger base64 blob the value starts at byte offset 0, 1 or 2 of a 3-byte group. Only
 * the characters whose 6 bits all come from the value are the same whatever surrounds it.
 */
function base64Cores(bytes: Buffer): string[] {
  const cores: string[] = [];
  for (let lead = 0; lead < 3; lead++) {
    const encoded = Buffer.concat([Buffer.alloc(lead), bytes]).toString("base64");
    const core = encoded.slice(Math.ceil((lead * 8) / 6), Math.floor(((lead + bytes.length) * 8) / 6));
    cores.push(core, core.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return cores;
}

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** As `base64Cores`, for RFC 4648 base32: 5-byte groups, 5 bits a character. */
function base32Cores(bytes: Buffer): string[] {
  const cores: string[] = [];
  for (let lead = 0; lead < 5; lead++) {
    const encoded = base32(Buffer.concat([Buffer.alloc(lead), bytes]));
    cores.push(encoded.slice(Math.ceil((lead * 8) / 5), Math.floor(((lead + bytes.length) * 8) / 5)));
  }
  return cores;
}

function base32(bytes: Buffer): string {
  let out = "";
  let bits = 0;
  let buffer = 0;
  for (const byte of bytes) {
    buffer = ((buffer << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += BASE32.charAt((buffer >> (bits - 5)) & 31);
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32.charAt((buffer << (5 - bits)) & 31);
  return out;
}

function urlEncodings(value: string): string[] {
  let component: string;
  try {
    component = encodeURIComponent(value);
  } catch {
    return []; // a lone surrogate: no URL form exists
  }
  // Form encoding (URLSearchParams) also escapes !'()~ and writes spaces as `+`.
  const form = new URLSearchParams([["", value]]).toString().slice(1);
  // Every byte escaped, which a URL allows and hides even the letters.
  const everyByte = [...Buffer.from(value, "utf8")].map((byte) => `%${hex2(byte).toUpperCase()}`).join("");
  const upper = [component, component.replaceAll("%20", "+"), form, everyByte];
  const lower = upper.map((text) => text.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()));
  return [...upper, ...lower];
}

function reversed(value: string): string {
  return Array.from(value).reverse().join("");
}

function rot13(value: string): string {
  return value.replace(/[A-Za-z]/g, (letter) => {
    const base = letter <= "Z" ? 65 : 97;
    return String.fromCharCode(((letter.charCodeAt(0) - base + 13) % 26) + base);
  });
}

/*
 * The value as a list of character codes, in the notations code uses: `[115, 107, …]` and
 * `String.fromCharCode(115, 107)`, `0x73, 0x6b`, `"\x73\x6b"`, `"\u0073\u006b"`, `&#115;&#107;`,
 * `&#x73;`, octal `"\163\153"`. Written here as the push scan sees them: with the joiners it drops
 * (spaces, commas, backslashes) already gone.
 */
function characterCodeForms(value: string): string[] {
  const codes = Array.from(value).map((char) => char.codePointAt(0) ?? 0);
  const each = (write: (code: number) => string): string => codes.map(write).join("");
  const forms = [each((code) => String(code)), each((code) => `&#${String(code)};`), each((code) => code.toString(8))];
  for (const upper of [false, true]) {
    const hex = (code: number): string => (upper ? code.toString(16).toUpperCase() : code.toString(16));
    forms.push(
      each((code) => `0x${hex(code)}`),
      each((code) => `x${hex(code).padStart(2, "0")}`),
      each((code) => `u${hex(code).padStart(4, "0")}`),
      each((code) => `&#x${hex(code)};`),
    );
  }
  return forms;
}

function hex2(byte: number): string {
  return byte.toString(16).padStart(2, "0");
}
