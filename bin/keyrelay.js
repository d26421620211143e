#!/usr/bin/env node
// Runs the built CLI (npm install builds it: see the `prepare` script). The Node version is checked first,
// before anything loads a SQLite driver: on an unsupported Node, one line and exit 1 instead of a crash.
import { unsupportedNodeMessage } from '../dist/src/node-support.js';

const refusal = unsupportedNodeMessage(process.versions.node);
if (refusal) {
  process.stderr.write(refusal + '\n');
  process.exit(1);
}
await import('../dist/src/cli/main.js');
