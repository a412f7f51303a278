import { parentPort, workerData } from "node:worker_threads";
import { scanForSecrets, type SecretScanInput } from "./secret-scan.js";

/*
 * The secret scan's thread: one scan, its input in `workerData`, its findings posted back. A
 * thread of its own so a 32 MiB diff (seconds of CPU) never stalls the process's event loop, and
 * so the scan can be stopped at its time limit. Whatever goes wrong here ends the thread, which
 * its caller reads as a refusal.
 */
parentPort?.postMessage(scanForSecrets(workerData as SecretScanInput));
