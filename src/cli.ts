#!/usr/bin/env node
// The `harness` command's entry point; everything testable lives in cli/main.ts.
import { main } from "./cli/main.js";

process.exitCode = await main(process.argv.slice(2));
