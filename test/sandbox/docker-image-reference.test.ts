import { describe, expect, test } from "vitest";
import {
  canonicalImage,
  imageAllowed,
  imagePatternProblem,
  imageReferenceProblem,
  MAX_IMAGE_REFERENCE_LENGTH,
} from "../../src/sandbox/docker/image-reference.js";

const DIGEST = `sha256:${"a1".repeat(32)}`;

describe("a Docker image reference's shape", () => {
  test.each([
    "node",
    "node:22",
    "node:22-bookworm-slim",
    "library/node:22",
    "ghcr.io/acme/runner:1.4",
    "ghcr.io/acme/tools/runner",
    `ghcr.io/acme/runner@${DIGEST}`,
    `ghcr.io/acme/runner:1.4@${DIGEST}`,
    "localhost:5000/runner:dev",
    "registry.example.com:8443/a.b/c_d/e__f/g--h:v1.0_rc-2",
    "[::1]:5000/runner:1",
  ])("%s is one", (reference) => {
    expect(imageReferenceProblem(reference)).toBeUndefined();
  });

  test.each([
    ["Node:22", /has upper-case letters in its name: Docker image names are lower case/],
    ["https://ghcr.io/acme/runner:1", /is an address, not a Docker image reference .*leave out the scheme/],
    ["ghcr.io/acme/runner:1.4 --privileged", /is not a Docker image reference \(name\[:tag\]\[@sha256:digest\]/],
    ["ghcr.io/acme/runner:", /is not a Docker image reference/],
    ["ghcr.io//runner", /is not a Docker image reference/],
    ["ghcr.io/acme/runner@sha256:abc", /is not a Docker image reference/],
    ["ghcr.io/acme/../runner", /is not a Docker image reference/],
    ["-rm", /is not a Docker image reference/],
    [`runner:${"x".repeat(129)}`, /is not a Docker image reference/],
    [`ghcr.io/${"a".repeat(250)}`, /has a name longer than Docker's 255 characters/],
    ["a".repeat(MAX_IMAGE_REFERENCE_LENGTH + 1), /is longer than 512 characters/],
  ])("%s is refused, saying why", (reference, problem) => {
    expect(imageReferenceProblem(reference)).toMatch(problem);
  });

  test("a reference resolves as the engine resolves it: registry and path in full, latest when untagged", () => {
    expect(canonicalImage("node")).toBe("docker.io/library/node:latest");
    expect(canonicalImage("acme/runner:2")).toBe("docker.io/acme/runner:2");
    expect(canonicalImage("index.docker.io/node:22")).toBe("docker.io/library/node:22");
    expect(canonicalImage("GHCR.io/acme/runner:1")).toBe("ghcr.io/acme/runner:1");
    expect(canonicalImage(`ghcr.io/acme/runner@${DIGEST}`)).toBe(`ghcr.io/acme/runner@${DIGEST}`);
  });
});

describe("a list of allowed images", () => {
  const allowed = ["ghcr.io/acme/*", "node:*", "python:3.12", "registry.example.com/base"];

  test.each([
    ["ghcr.io/acme/runner:1.4", true],
    [`ghcr.io/acme/tools/runner@${DIGEST}`, true],
    ["GHCR.IO/acme/runner:1", true],
    ["node:22", true],
    ["docker.io/library/node:20-slim", true],
    ["python:3.12", true],
    ["docker.io/library/python:3.12", true],
    ["registry.example.com/base", true],
    ["registry.example.com/base:latest", true],
    // What the list does not name, including look-alikes of what it does.
    ["ghcr.io/acme-evil/runner:1", false],
    ["ghcr.io/other/runner:1", false],
    ["node.evil.example/miner:1", false],
    ["nodejs:1", false],
    ["python:3.13", false],
    ["registry.example.com/base:2", false],
    ["Not A Reference", false],
  ])("%s: %s", (image, expected) => {
    expect(imageAllowed(image, allowed)).toBe(expected);
  });

  test("`*` alone admits any image; an empty list none", () => {
    expect(imageAllowed("ghcr.io/anyone/anything:1", ["*"])).toBe(true);
    expect(imageAllowed("node:22", [])).toBe(false);
  });

  test("an entry is a reference or the start of one followed by `*`, and says so when it is neither", () => {
    expect(imagePatternProblem("ghcr.io/acme/*")).toBeUndefined();
    expect(imagePatternProblem("node:22")).toBeUndefined();
    expect(imagePatternProblem("*")).toBeUndefined();
    expect(imagePatternProblem("ghcr.io/*/runner")).toMatch(/is not a Docker image reference/);
    expect(imagePatternProblem("ghcr.io/acme team/*")).toMatch(
      /only letters, digits, .* before the one `\*` at its end/,
    );
  });
});
