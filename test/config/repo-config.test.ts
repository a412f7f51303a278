import { describe, expect, test } from "vitest";
import { parseRepoConfig, RepoConfigError } from "../../src/config/repo-config.js";

describe(".github/harness.yml: sandbox.network and setup secrets", () => {
  test("network modes and allowlists parse; the defaults leave both unset (the operator's ceiling applies)", () => {
    expect(parseRepoConfig({}).sandbox).toEqual({});
    expect(
      parseRepoConfig({
        sandbox: { network: "allowlist", allow: ["registry.npmjs.org", "*.pythonhosted.org", "203.0.113.0/24"] },
      }).sandbox,
    ).toEqual({ network: "allowlist", allow: ["registry.npmjs.org", "*.pythonhosted.org", "203.0.113.0/24"] });
  });

  test.each([
    [{ sandbox: { network: "wide-open" } }, /`sandbox.network`/],
    [
      { sandbox: { network: "open", allow: ["example.com"] } },
      /`sandbox.allow` only applies with `sandbox.network: allowlist`/,
    ],
    [
      { sandbox: { network: "allowlist", allow: ["https://example.com/path"] } },
      /`sandbox.allow` .*https:\/\/example\.com\/path/,
    ],
    [{ sandbox: { network: "allowlist", allow: ["*.com"] } }, /`sandbox.allow`/],
    [{ setup_secrets: ["NPM_TOKEN"] }, /`setup_secrets` needs a `setup` command/],
    [{ setup: "npm ci", setup_secrets: ["npm-token"] }, /`setup_secrets.0`/],
  ])("%j is refused with the key named", (raw, message) => {
    expect(() => parseRepoConfig(raw)).toThrow(RepoConfigError);
    expect(() => parseRepoConfig(raw)).toThrow(message);
  });
});
