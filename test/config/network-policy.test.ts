import { describe, expect, test } from "vitest";
import { resolveNetworkPolicy, type NetworkContext } from "../../src/config/network-policy.js";

const context = (overrides: Partial<NetworkContext> = {}): NetworkContext => ({
  ceiling: "open",
  operatorAllow: [],
  sandbox: "local-isolated",
  agentEndpoints: ["api.anthropic.com"],
  ...overrides,
});

describe("the network a run gets", () => {
  test("a repository that says nothing gets the operator's ceiling", () => {
    expect(resolveNetworkPolicy({}, context())).toEqual({ policy: { mode: "open" } });
    expect(resolveNetworkPolicy({}, context({ ceiling: "none" }))).toEqual({ policy: { mode: "none" } });
  });

  test("a repository may close its network further, never open it wider", () => {
    expect(resolveNetworkPolicy({ mode: "none" }, context({ ceiling: "allowlist" }))).toEqual({
      policy: { mode: "none" },
    });
    expect(resolveNetworkPolicy({ mode: "open" }, context({ ceiling: "allowlist" }))).toEqual({
      error: expect.stringMatching(
        /more open than this installation allows \(at most `allowlist`.*HARNESS_NETWORK/,
      ) as unknown,
    });
    expect(resolveNetworkPolicy({ mode: "allowlist" }, context({ ceiling: "none" }))).toMatchObject({
      error: expect.stringMatching(/at most `none`/) as unknown,
    });
  });

  test("an allowlist keeps the agent's model API and the operator's entries, apart from the repository's", () => {
    const result = resolveNetworkPolicy(
      { mode: "allowlist", allow: ["registry.npmjs.org", "api.anthropic.com", "registry.npmjs.org"] },
      context({ operatorAllow: ["npm.internal.example", "10.0.0.0/8"] }),
    );
    // The proxy must know who wrote each entry: only the operator's may open internal addresses.
    expect(result).toEqual({
      policy: {
        mode: "allowlist",
        allow: {
          operator: ["api.anthropic.com", "npm.internal.example", "10.0.0.0/8"],
          repository: ["registry.npmjs.org", "api.anthropic.com"],
        },
      },
    });
  });

  test("a mode the sandbox cannot enforce is refused, never left open", () => {
    expect(resolveNetworkPolicy({ mode: "allowlist" }, context({ sandbox: "daytona" }))).toMatchObject({
      error: expect.stringMatching(/cannot be enforced on Daytona/) as unknown,
    });
    expect(resolveNetworkPolicy({ mode: "none" }, context({ sandbox: "daytona" }))).toEqual({
      policy: { mode: "none" },
    });
    for (const mode of ["none", "allowlist"] as const) {
      expect(resolveNetworkPolicy({ mode }, context({ sandbox: "local-unisolated" }))).toMatchObject({
        error: expect.stringMatching(/without isolation/) as unknown,
      });
    }
    expect(resolveNetworkPolicy({ mode: "open" }, context({ sandbox: "local-unisolated" }))).toEqual({
      policy: { mode: "open" },
    });
  });
});
