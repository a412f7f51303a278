import type { Sandbox } from "../../src/sandbox/types.js";

/**
 * `sandbox` with some of its methods replaced: every other one is the sandbox's own, bound to
 * it, so a sandbox that keeps state between calls (the Docker one counts its commands) keeps it
 * in one place whichever way it is called.
 */
export function overriding(sandbox: Sandbox, overrides: Partial<Sandbox>): Sandbox {
  return {
    id: sandbox.id,
    workDir: sandbox.workDir,
    modelGatewayUrl: sandbox.modelGatewayUrl,
    clonedFrom: sandbox.clonedFrom,
    exec: sandbox.exec.bind(sandbox),
    uploadFiles: sandbox.uploadFiles.bind(sandbox),
    downloadFile: sandbox.downloadFile.bind(sandbox),
    downloadBytes: sandbox.downloadBytes.bind(sandbox),
    downloadToFile: sandbox.downloadToFile.bind(sandbox),
    writeScratchFile: sandbox.writeScratchFile.bind(sandbox),
    removeScratchFile: sandbox.removeScratchFile.bind(sandbox),
    snapshot: sandbox.snapshot.bind(sandbox),
    pause: sandbox.pause.bind(sandbox),
    resume: sandbox.resume.bind(sandbox),
    teardown: sandbox.teardown.bind(sandbox),
    ...overrides,
  };
}
