#!/usr/bin/env node
// Runs the built CLI (npm install builds it: see the `prepare` script).
import '../dist/src/cli/main.js';
