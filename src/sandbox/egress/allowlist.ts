import { isIP, isIPv4, isIPv6 } from "node:net";
import { domainToASCII } from "node:url";
import { HarnessError } from "../../util/errors.js";
import type { NetworkPolicy } from "../types.js";

/**
 * Which hosts a sandboxed command may reach through the egress proxy. Pure: no DNS, no I/O, so
 * the same answer comes out in the proxy, in config validation and in tests.
 */

export type AllowEntry =
  | { kind: "domain"; name: string; wildcard: boolean }
  | { kind: "cidr"; network: string; prefix: number; family: 4 | 6 };

/** An allowlist entry an operator wrote that cannot mean what they intended. */
export class AllowlistError extends HarnessError {
  constructor(message: string) {
    super("invalid_allowlist", message);
  }
}

export const MAX_ALLOWLIST_ENTRIES = 256;
/** The longest DNS name; no domain, CIDR or IP is longer. */
export const MAX_ENTRY_LENGTH = 253;

const MAX_LABEL_LENGTH = 63;
const LABEL_CHARS = /^[a-z0-9_-]+$/;
const DIGITS = /^[0-9]+$/;
const HEX_NUMBER = /^0x[0-9a-f]*$/;

export function parseAllowlist(entries: readonly string[]): { entries: AllowEntry[] } {
  if (entries.length > MAX_ALLOWLIST_ENTRIES) {
    throw new AllowlistError(
      `The egress allowlist has ${entries.length} entries; at most ${MAX_ALLOWLIST_ENTRIES} are allowed ` +
        `(use a wildcard or a CIDR to cover many hosts)`,
    );
  }
  return { entries: entries.map(parseEntry) };
}

function parseEntry(raw: string): AllowEntry {
  const entry = raw.trim();
  if (entry.length > MAX_ENTRY_LENGTH) {
    throw new AllowlistError(
      `${quote(entry)} is longer than ${MAX_ENTRY_LENGTH} characters, so it is neither a domain nor a CIDR nor an IP`,
    );
  }
  const slash = entry.indexOf("/");
  if (slash !== -1 && !entry.includes("://")) {
    const cidr = parseCidr(entry.slice(0, slash), entry.slice(slash + 1));
    if (typeof cidr === "string") throw new AllowlistError(`${quote(entry)} is not a valid CIDR: ${cidr}`);
    if (cidr) return cidr;
    throw invalidEntry(entry);
  }
  const ip = bareIp(entry);
  // A zone (fe80::1%eth0) names an interface of one host; it cannot mean anything in a policy.
  if (ip?.includes("%")) throw invalidEntry(entry);
  if (ip !== undefined) {
    const family = isIPv4(ip) ? 4 : 6;
    return { kind: "cidr", network: formatIp(parseIp(ip)), prefix: family === 4 ? 32 : 128, family };
  }

  const wildcard = entry.startsWith("*.");
  const name = domainName(wildcard ? entry.slice(2) : entry);
  if (name === undefined) throw invalidEntry(entry);
  if (wildcard && !name.includes(".")) {
    // `*.com` would open a whole top-level domain, which is never what a per-repo list means.
    throw new AllowlistError(
      `${quote(entry)} would allow every name under a top-level domain; ` +
        `name at least two labels after "*." (*.example.com)`,
    );
  }
  return { kind: "domain", name, wildcard };
}

/** A CIDR entry, `undefined` when the text before the slash is not an address, or why the prefix is wrong. */
function parseCidr(address: string, prefixText: string): AllowEntry | string | undefined {
  const ip = bareIp(address);
  if (ip === undefined || ip.includes("%")) return undefined;
  const family = isIPv4(ip) ? 4 : 6;
  const bits = family === 4 ? 32 : 128;
  if (!DIGITS.test(prefixText) || prefixText.length > 3) return `the prefix "${prefixText}" is not a number of bits`;
  const prefix = Number(prefixText);
  if (prefix > bits) return `an IPv${family} prefix is at most ${bits} bits`;
  // Host bits are dropped (10.1.2.3/8 is 10.0.0.0/8), as ip route and most firewalls do.
  return { kind: "cidr", network: formatIp(masked(parseIp(ip), prefix)), prefix, family };
}

function invalidEntry(entry: string): AllowlistError {
  let hint = "";
  if (entry.includes("://")) hint = "; write the host name alone, without a scheme";
  else if (entry.includes("/")) hint = "; write the host name alone, without a path";
  else if (/^[^:]+:[0-9]*$/.test(entry)) hint = "; ports are configured separately from hosts";
  return new AllowlistError(
    `${quote(entry)} is neither a domain (example.com, *.example.com) nor a CIDR (10.0.0.0/8) nor an IP${hint}`,
  );
}

/**
 * An entry as it can be shown in one line of an error message: bounded, printable ASCII only, so
 * neither control characters nor bidi overrides can disguise what the operator wrote.
 */
function quote(entry: string): string {
  const shown = entry.slice(0, 80).replace(/[^\x20-\x7e]/g, "?");
  return `\`${shown}${entry.length > 80 ? "…" : ""}\``;
}

/**
 * A host name in the form DNS and the allowlist compare (lowercase, ASCII, no trailing dot), or
 * undefined when it is not a syntactically valid name.
 */
function domainName(text: string): string | undefined {
  let name = text;
  // Non-ASCII names go on the wire as punycode; the allowlist must hold the same form.
  if (!isAscii(name)) name = domainToASCII(name);
  name = name.toLowerCase();
  if (name === "" || name.length > MAX_ENTRY_LENGTH) return undefined;
  const labels = name.split(".");
  for (const label of labels) {
    if (label.length === 0 || label.length > MAX_LABEL_LENGTH) return undefined;
    if (!LABEL_CHARS.test(label) || label.startsWith("-") || label.endsWith("-")) return undefined;
  }
  // A name ending in a number is an IPv4 address to URL parsers and getaddrinfo (127.1,
  // 0x7f.1, 2130706433 are all 127.0.0.1), so it must never pass as a domain.
  const last = labels[labels.length - 1] ?? "";
  if (DIGITS.test(last) || HEX_NUMBER.test(last)) return undefined;
  return name;
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** An IP literal without brackets, or undefined. Zone ids (fe80::1%eth0) are kept. */
function bareIp(text: string): string | undefined {
  if (text.startsWith("[") && text.endsWith("]")) {
    const inner = text.slice(1, -1);
    return isIPv6(inner) ? inner : undefined;
  }
  return isIP(text) === 0 ? undefined : text;
}

export type NormalizedHost = { kind: "ip"; address: string } | { kind: "domain"; name: string };

/**
 * The host of a request as the proxy matches and resolves it: an IP literal (brackets and zone
 * dropped) or a lowercase ASCII name with its trailing dot dropped; undefined when it is neither.
 */
export function normalizeHost(host: string): NormalizedHost | undefined {
  if (host.length === 0 || host.length > MAX_ENTRY_LENGTH + 1) return undefined;
  const ip = bareIp(host);
  if (ip !== undefined) {
    const zone = ip.indexOf("%");
    return { kind: "ip", address: zone === -1 ? ip : ip.slice(0, zone) };
  }
  // Only the ASCII form: a client that sends raw UTF-8 in a request line is not one to help.
  if (!isAscii(host)) return undefined;
  const name = domainName(host.endsWith(".") ? host.slice(0, -1) : host);
  return name === undefined ? undefined : { kind: "domain", name };
}

export function hostAllowed(list: readonly AllowEntry[], host: string): boolean {
  const normalized = normalizeHost(host);
  if (!normalized) return false;
  // An IP literal is only as trusted as a CIDR entry says: a domain entry never vouches for the
  // address it happened to resolve to when the list was written.
  if (normalized.kind === "ip") return addressAllowed(list, normalized.address);
  const name = normalized.name;
  return list.some(
    (entry) => entry.kind === "domain" && (entry.wildcard ? name.endsWith(`.${entry.name}`) : name === entry.name),
  );
}

export function addressAllowed(list: readonly AllowEntry[], ip: string): boolean {
  const forms = addressForms(ip);
  if (!forms) return false;
  return list.some((entry) => {
    if (entry.kind !== "cidr") return false;
    const address = entry.family === 4 ? forms.v4 : forms.v6;
    return address !== undefined && inNetwork(address, parseIp(entry.network), entry.prefix);
  });
}

/**
 * Addresses a sandboxed command must not reach through a name that merely resolves there:
 * the host itself, the harness's private network, cloud metadata services (169.254.169.254,
 * Alibaba's 100.100.100.200, AWS's fd00:ec2::254) and addresses that are not unicast at all.
 * Anything that is not an IP address counts as internal: the caller should never connect to it.
 */
export function isInternalAddress(ip: string): boolean {
  const forms = addressForms(ip);
  if (!forms) return true;
  // A v4 address is matched in its mapped form (::ffff:a.b.c.d), which the v6 table covers too.
  return INTERNAL_V6.some((range) => inNetwork(forms.v6, range.network, range.prefix));
}

/** The entries of one run's allowlist kept by who wrote them, since only the operator may open internal addresses. */
export interface EgressAllowlist {
  /** HARNESS_NETWORK_ALLOW and the agent's model API hosts. */
  operator: readonly AllowEntry[];
  /** The repository's `sandbox.allow` (with its organisation's): never trusted with an internal address. */
  repository: readonly AllowEntry[];
}

/**
 * A run's allowlist, parsed before anything is created (a bad entry is the caller's error, not a
 * half-made sandbox); undefined for a network that is not an allowlist.
 */
export function allowlistOf(network: NetworkPolicy): EgressAllowlist | undefined {
  if (network.mode !== "allowlist") return undefined;
  return {
    operator: parseAllowlist(network.allow.operator).entries,
    repository: parseRepositoryAllowlist(network.allow.repository).entries,
  };
}

/** Whether a request may name this host at all: a domain or an address either list names. */
export function hostListed(allowlist: EgressAllowlist, host: string): boolean {
  return hostAllowed(allowlist.operator, host) || hostAllowed(allowlist.repository, host);
}

/**
 * Whether the proxy may connect to an address a request named or a listed name resolved to: any
 * public address, and an internal one only when an operator's CIDR covers it. A repository's
 * CIDR never vouches for an internal address, however wide it is.
 */
export function mayConnect(allowlist: EgressAllowlist, ip: string): boolean {
  return !isInternalAddress(ip) || addressAllowed(allowlist.operator, ip);
}

/**
 * A repository's entries (`sandbox.allow`), parsed like any list, less any CIDR that reaches an
 * internal address: those only the operator may open, and the operator's entries are in every
 * allowlist already, so a repository never needs to list one. A CIDR that overlaps an internal
 * range at all is refused, so `0.0.0.0/0`, `::/0`, `0.0.0.0/1` or `::ffff:0:0/96` cannot carry
 * loopback or metadata addresses in with the public ones.
 */
export function parseRepositoryAllowlist(entries: readonly string[]): { entries: AllowEntry[] } {
  const parsed = parseAllowlist(entries).entries;
  parsed.forEach((entry, index) => {
    if (entry.kind !== "cidr") return;
    const reached = internalRangesOverlapping(entry);
    if (reached.length === 0) return;
    const verb = entry.prefix === (entry.family === 4 ? 32 : 128) ? "is one of the" : "covers";
    throw new AllowlistError(
      `entry ${quote((entries[index] ?? "").trim())} ${verb} ${describeRanges(reached)}; ` +
        `only the operator can allow those, in HARNESS_NETWORK_ALLOW, whose entries every allowlist already includes`,
    );
  });
  return { entries: parsed };
}

/** A range a sandboxed command must not reach unless the operator allows it. */
interface InternalRange {
  network: Uint8Array;
  prefix: number;
  /** What it is, in the words an error message uses ("loopback", "private"). */
  kind: string;
}

const INTERNAL_V4_TEXT: Array<[string, number, string]> = [
  ["0.0.0.0", 8, "unspecified"], // "this network": 0.0.0.0 connects to the host itself on Linux
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "shared"], // carrier-grade NAT, also Alibaba Cloud's metadata service
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local"], // including the 169.254.169.254 metadata service
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "reserved"], // IETF protocol assignments (some clouds put metadata endpoints here)
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "reserved"], // benchmarking, used by fake-IP DNS setups for local redirection
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"], // including the broadcast address
];

const INTERNAL_V6_TEXT: Array<[string, number, string]> = [
  ["::", 96, "loopback"], // unspecified, loopback and the deprecated v4-compatible form
  ["64:ff9b:1::", 48, "NAT64 local-use"], // RFC 8215: a site's own translator, to whatever it routes
  ["fc00::", 7, "unique local"], // including AWS's fd00:ec2::254 metadata service
  ["fe80::", 10, "link-local"],
  ["fec0::", 10, "site-local"], // deprecated
  ["ff00::", 8, "multicast"],
];

const MAPPED_V4 = parseIp("::ffff:0:0");

const INTERNAL_V4: InternalRange[] = INTERNAL_V4_TEXT.map(([network, prefix, kind]) => ({
  network: parseIp(network),
  prefix,
  kind,
}));

/**
 * The native v6 ranges, then every v6 form that carries an internal v4 address: mapped
 * (::ffff:a.b.c.d, which the kernel delivers to a.b.c.d), and NAT64 and 6to4, which a gateway
 * delivers to that address.
 */
const INTERNAL_V6: InternalRange[] = [
  ...INTERNAL_V6_TEXT.map(([network, prefix, kind]) => ({ network: parseIp(network), prefix, kind })),
  ...embeddingsOfInternalV4("::ffff:0:0", 96, "IPv4-mapped"),
  ...embeddingsOfInternalV4("64:ff9b::", 96, "NAT64"),
  ...embeddingsOfInternalV4("2002::", 16, "6to4"),
];

/** Each internal v4 range written into a v6 prefix at bit `at`. */
function embeddingsOfInternalV4(prefixText: string, at: number, form: string): InternalRange[] {
  const base = parseIp(prefixText);
  return INTERNAL_V4.map(({ network, prefix, kind }) => {
    const bytes = Uint8Array.from(base);
    bytes.set(network, at / 8);
    return { network: bytes, prefix: at + prefix, kind: `${form} ${kind}` };
  });
}

/** The internal ranges a CIDR shares any address with: two CIDRs overlap when the shorter prefix holds both. */
function internalRangesOverlapping(entry: AllowEntry & { kind: "cidr" }): InternalRange[] {
  const network = parseIp(entry.network);
  return (entry.family === 4 ? INTERNAL_V4 : INTERNAL_V6).filter((range) =>
    inNetwork(network, range.network, Math.min(entry.prefix, range.prefix)),
  );
}

/** "private and loopback addresses (10.0.0.0/8, 127.0.0.0/8)", a few of each named. */
function describeRanges(ranges: readonly InternalRange[]): string {
  const kinds = [...new Set(ranges.map((range) => range.kind))];
  const shownKinds = kinds.length > 4 ? [...kinds.slice(0, 4), "other internal"] : kinds;
  const cidrs = ranges.slice(0, 4).map((range) => `${formatIp(range.network)}/${range.prefix}`);
  const more = ranges.length > 4 ? ` and ${ranges.length - 4} more` : "";
  return `${listed(shownKinds)} addresses (${cidrs.join(", ")}${more})`;
}

function listed(words: readonly string[]): string {
  return words.length < 2 ? words.join("") : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1] ?? ""}`;
}

/** The v4 form (for v4 and v4-mapped v6 addresses) and the v6 form of an address. */
function addressForms(ip: string): { family: 4 | 6; v4: Uint8Array | undefined; v6: Uint8Array } | undefined {
  const bare = stripZone(ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip);
  if (isIP(bare) === 0) return undefined;
  const bytes = parseIp(bare);
  if (bytes.length === 4) {
    const v6 = new Uint8Array(16);
    v6.set(MAPPED_V4.subarray(0, 12));
    v6.set(bytes, 12);
    return { family: 4, v4: bytes, v6 };
  }
  return { family: 6, v4: inNetwork(bytes, MAPPED_V4, 96) ? bytes.slice(12, 16) : undefined, v6: bytes };
}

function stripZone(ip: string): string {
  const zone = ip.indexOf("%");
  return zone === -1 ? ip : ip.slice(0, zone);
}

/** The bytes of an address that net.isIP has already accepted (4 for v4, 16 for v6). */
function parseIp(text: string): Uint8Array {
  const ip = stripZone(text);
  if (isIPv4(ip)) return Uint8Array.from(ip.split(".").map(Number));
  let hex = ip;
  const lastColon = hex.lastIndexOf(":");
  const tail = hex.slice(lastColon + 1);
  if (tail.includes(".")) {
    // A dotted v4 tail (::ffff:1.2.3.4) is two 16-bit groups.
    const [a = 0, b = 0, c = 0, d = 0] = tail.split(".").map(Number);
    hex = `${hex.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = hex.split("::");
  const head = halves[0] ? halves[0].split(":") : [];
  const rest = halves.length > 1 && halves[1] ? halves[1].split(":") : [];
  const groups = [...head, ...Array<string>(8 - head.length - rest.length).fill("0"), ...rest];
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[i * 2] = value >> 8;
    bytes[i * 2 + 1] = value & 0xff;
  });
  return bytes;
}

function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join(".");
  // RFC 5952 writes a v4-mapped address with its v4 part dotted, as people recognise it.
  if (inNetwork(bytes, MAPPED_V4, 96)) return `::ffff:${bytes.slice(12).join(".")}`;
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  // RFC 5952: the longest run (of at least two) of zero groups becomes "::".
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const text = groups.map((group) => group.toString(16));
  if (bestStart === -1) return text.join(":");
  return `${text.slice(0, bestStart).join(":")}::${text.slice(bestStart + bestLength).join(":")}`;
}

function masked(bytes: Uint8Array, prefix: number): Uint8Array {
  const result = Uint8Array.from(bytes);
  for (let bit = prefix; bit < result.length * 8; bit++) {
    const index = bit >> 3;
    result[index] = (result[index] ?? 0) & ~(0x80 >> (bit & 7));
  }
  return result;
}

function inNetwork(address: Uint8Array, network: Uint8Array, prefix: number): boolean {
  if (address.length !== network.length) return false;
  const whole = prefix >> 3;
  for (let i = 0; i < whole; i++) if (address[i] !== network[i]) return false;
  const rest = prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return ((address[whole] ?? 0) & mask) === ((network[whole] ?? 0) & mask);
}
