import { describe, expect, test } from "vitest";
import { resolveRepoConfig } from "../../src/config/org-floor.js";
import { parseRepoConfig, RepoConfigError } from "../../src/config/repo-config.js";

/*
 * A repository's `sandbox.allow` may name public hosts and ranges only: a CIDR that overlaps
 * loopback, private, link-local (metadata) or other internal addresses, in any of their v4 or v6
 * forms, is refused when `.github/harness.yml` is read, because only the operator may open those.
 */

/** The one problem `.github/harness.yml` with this `sandbox.allow` is refused with. */
function problemWith(allow: string[]): string {
  try {
    parseRepoConfig({ sandbox: { network: "allowlist", allow } });
  } catch (error) {
    if (error instanceof RepoConfigError && error.problems.length === 1) return error.problems[0] ?? "";
    throw error;
  }
  throw new Error(`expected sandbox.allow ${JSON.stringify(allow)} to be refused`);
}

const OPERATOR_ONLY = "only the operator can allow those, in HARNESS_NETWORK_ALLOW";

describe("sandbox.allow: CIDRs that reach internal addresses", () => {
  test("a range over internal addresses is refused, naming the entry, what it covers and who may allow it", () => {
    expect(problemWith(["registry.npmjs.org", "0.0.0.0/1"])).toBe(
      "`sandbox.allow` entry `0.0.0.0/1` covers unspecified, private, shared and loopback addresses " +
        "(0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8); " +
        "only the operator can allow those, in HARNESS_NETWORK_ALLOW, whose entries every allowlist already includes",
    );
  });

  test.each([
    ["0.0.0.0/0", "covers unspecified, private, shared, loopback and other internal addresses (0.0.0.0/8, "],
    ["::/0", "covers loopback, NAT64 local-use, unique local, link-local and other internal addresses (::/96, "],
    ["0.0.0.0/1", "(0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8)"],
    ["128.0.0.0/1", "covers link-local, private, reserved and multicast addresses (169.254.0.0/16, 172.16.0.0/12, "],
    // Not a /0 but still over 10/8: overlapping at all is enough.
    ["8.0.0.0/6", "covers private addresses (10.0.0.0/8)"],
    ["169.254.0.0/16", "covers link-local addresses (169.254.0.0/16)"],
    ["100.64.0.0/10", "covers shared addresses (100.64.0.0/10)"],
    ["fc00::/7", "covers unique local addresses (fc00::/7)"],
    ["fe80::/10", "covers link-local addresses (fe80::/10)"],
    ["ff00::/8", "covers multicast addresses (ff00::/8)"],
    // The v6 forms a v4 address travels in: the kernel or a gateway delivers them to the v4 address.
    ["::ffff:0:0/96", "covers IPv4-mapped unspecified, IPv4-mapped private, "],
    ["::ffff:127.0.0.0/104", "covers IPv4-mapped loopback addresses (::ffff:127.0.0.0/104)"],
    ["::ffff:0.0.0.0/97", "(::ffff:0.0.0.0/104, ::ffff:10.0.0.0/104, ::ffff:100.64.0.0/106, ::ffff:127.0.0.0/104)"],
    ["::/96", "covers loopback addresses (::/96)"],
    ["64:ff9b::/96", "covers NAT64 unspecified, NAT64 private, NAT64 shared, NAT64 loopback and other internal"],
    ["64:ff9b:1::/48", "covers NAT64 local-use addresses (64:ff9b:1::/48)"],
    ["64::/16", "64:ff9b:1::/48"],
    ["2002::/16", "covers 6to4 unspecified, 6to4 private"],
    ["2000::/3", "(2002::/24, 2002:a00::/24, 2002:6440::/26, 2002:7f00::/24 and 7 more)"],
  ])("%s is refused, naming it", (entry, covered) => {
    const problem = problemWith([entry]);
    expect(problem.startsWith(`\`sandbox.allow\` entry \`${entry}\` `)).toBe(true);
    expect(problem).toContain(covered);
    expect(problem).toContain(OPERATOR_ONLY);
  });

  test.each([
    ["127.0.0.1", "is one of the loopback addresses (127.0.0.0/8)"],
    ["169.254.169.254", "is one of the link-local addresses (169.254.0.0/16)"],
    ["100.100.100.200", "is one of the shared addresses (100.64.0.0/10)"],
    ["::1", "is one of the loopback addresses (::/96)"],
    ["[fd00:ec2::254]", "is one of the unique local addresses (fc00::/7)"],
    ["::ffff:169.254.169.254", "is one of the IPv4-mapped link-local addresses (::ffff:169.254.0.0/112)"],
    ["64:ff9b::7f00:1", "is one of the NAT64 loopback addresses (64:ff9b::7f00:0/104)"],
    ["64:ff9b:1::a00:1", "is one of the NAT64 local-use addresses (64:ff9b:1::/48)"],
    ["2002:a9fe:a9fe::", "is one of the 6to4 link-local addresses (2002:a9fe::/32)"],
  ])("the single internal address %s is refused, naming it", (entry, what) => {
    expect(problemWith([entry])).toBe(
      `\`sandbox.allow\` entry \`${entry}\` ${what}; ` +
        "only the operator can allow those, in HARNESS_NETWORK_ALLOW, whose entries every allowlist already includes",
    );
  });

  test("public ranges, right up to an internal one, and domains are accepted", () => {
    const allow = [
      "registry.npmjs.org",
      "*.pythonhosted.org",
      "8.0.0.0/7", // 8.0.0.0-9.255.255.255, next to 10/8
      "11.0.0.0/8",
      "203.0.113.0/24",
      "1.1.1.1",
      "2600::/12",
      "2001:4860:4860::8888",
      "::ffff:1.1.1.0/120",
      "64:ff9b::808:800/120", // NAT64 form of 8.8.8.0/24
    ];
    expect(parseRepoConfig({ sandbox: { network: "allowlist", allow } }).sandbox.allow).toEqual(allow);
  });

  test("the organisation's file is held to the same rule, and the problem says it is the organisation's", () => {
    try {
      resolveRepoConfig(
        { org: { sandbox: { network: "allowlist", allow: ["10.0.0.0/8"] } }, repo: null },
        "acme/.github",
      );
      expect.unreachable("the organisation's internal CIDR should be refused");
    } catch (error) {
      expect(error).toBeInstanceOf(RepoConfigError);
      expect((error as RepoConfigError).problems).toEqual([
        "acme/.github (the organisation's `.github` repository): `sandbox.allow` entry `10.0.0.0/8` covers " +
          "private addresses (10.0.0.0/8); " +
          "only the operator can allow those, in HARNESS_NETWORK_ALLOW, whose entries every allowlist already includes",
      ]);
    }
  });
});
