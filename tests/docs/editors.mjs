// Runs one scenario of tests/docs/scenarios.mjs on Node, with the `ws` package (Node 20 has no
// WebSocket), and prints its result as the last line, JSON. tests/e2e/docs.rs runs it:
//
//   node tests/docs/editors.mjs <scenario> <json args>
//
// `awareness` is Node's own: Ann holds her state in a child process, which is SIGKILLed.

import { fork } from 'node:child_process'
import WebSocket from 'ws'

import { scenarios, sleep } from './scenarios.mjs'

const [name, argText] = process.argv.slice(2)
const args = JSON.parse(argText ?? '{}')
const play = scenarios(args, WebSocket)

async function awareness () {
  const child = fork(new URL(import.meta.url).pathname, ['hold', argText], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
  await play.watch()
  child.kill('SIGKILL')
  return play.gone()
}

async function hold () {
  await play.hold()
  await sleep(600000) // until killed
}

const run = { ...play, awareness, hold }[name]
if (!run) throw new Error(`no such scenario: ${name}`)
console.log(JSON.stringify(await run()))
process.exit(0)
