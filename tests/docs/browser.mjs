// tests/docs/scenarios.mjs for a page: client/e2e/editor.test.ts bundles this file and runs
// the scenarios in Chromium with the browser's own WebSocket.

import { scenarios } from './scenarios.mjs'

globalThis.docScenarios = (args) => scenarios(args)
