import { fakeGitHubRoutes } from "../server.js";
import { loadSpecSubset } from "./spec-subset.js";
import { writeCompiledValidators } from "./validator.js";

/**
 * Builds the cached subset of GitHub's description once, before the test workers start, so they
 * do not each parse 24 MB of JSON or compile its schemas; it also fails the run at once when the fake serves a route
 * GitHub does not document.
 */
export default function setup(): void {
  writeCompiledValidators(loadSpecSubset(fakeGitHubRoutes()));
}
