// Stock Yjs editors against a document kind: `y-websocket`'s own WebsocketProvider, unmodified
// from npm, on Node (the `ws` package: Node 20 has no WebSocket). The e2e trials
// (tests/e2e/docs.rs) run one scenario each and read the last line printed, a JSON object; a
// scenario that cannot finish throws, which exits non-zero with the reason on stderr.
//
//   node tests/docs/editors.mjs <scenario> <json args>
//
// args: {"url": "ws://127.0.0.1:PORT/docs", "room": "...", "tokens": {...}, "admin": "..."}

import { fork } from 'node:child_process'
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'

const [scenario, argText] = process.argv.slice(2)
const args = JSON.parse(argText ?? '{}')
const SAVED = 100
const REFUSED = 101

/** A stock editor: a Y.Doc and its provider; `homeroom` asks for the extension messages. */
function editor (token, { homeroom = false, connect = true } = {}) {
  const doc = new Y.Doc()
  const params = { token }
  if (homeroom) params.homeroom = '1'
  const provider = new WebsocketProvider(args.url, args.room, doc, {
    WebSocketPolyfill: WebSocket,
    params,
    connect,
    disableBc: true
  })
  const e = { doc, provider, text: doc.getText('text'), saved: 0, refused: [] }
  if (homeroom) {
    // What our provider adds: the room's word that an update is stored, or refused.
    provider.messageHandlers[SAVED] = (_enc, decoder) => { e.saved = readVarUint(decoder) }
    provider.messageHandlers[REFUSED] = (_enc, decoder) => {
      const index = readVarUint(decoder)
      e.refused.push({ index, code: readVarString(decoder) })
    }
  }
  return e
}

// lib0's decoding, by hand (two functions; lib0 is y-websocket's own dependency).
function readVarUint (decoder) {
  let num = 0; let mult = 1
  for (;;) {
    const r = decoder.arr[decoder.pos++]
    num += (r & 127) * mult
    mult *= 128
    if (r < 128) return num
  }
}
function readVarString (decoder) {
  const len = readVarUint(decoder)
  const bytes = decoder.arr.subarray(decoder.pos, decoder.pos + len)
  decoder.pos += len
  return new TextDecoder().decode(bytes)
}

const sleep = (ms) => new Promise(resolve => setTimeout(resolve, ms))

/** Waits until `pred()` holds (polling), or throws `what` after `ms`. */
async function until (what, pred, ms = 10000) {
  const end = Date.now() + ms
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`)
    await sleep(20)
  }
}

const synced = (e, what) => until(`${what} synced`, () => e.provider.synced)
const done = (result) => { console.log(JSON.stringify(result)); process.exit(0) }

/** Types `text` a few characters at a time, as a person would, at the end of the text. */
async function type (e, text) {
  for (let i = 0; i < text.length; i += 3) {
    e.text.insert(e.text.length, text.slice(i, i + 3))
    await sleep(5)
  }
}

const scenarios = {
  // Two editors type at once; both converge; a third joins late and gets the whole document.
  async converge () {
    const a = editor(args.tokens.ann)
    const b = editor(args.tokens.bob)
    await Promise.all([synced(a, 'ann'), synced(b, 'bob')])
    // Whole words, each one insert: concurrent inserts interleave but never split a word.
    const words = async (e, who) => {
      for (let i = 0; i < 20; i++) {
        e.text.insert(e.text.length, `${who}${String(i).padStart(2, '0')};`)
        await sleep(5)
      }
    }
    await Promise.all([words(a, 'ann'), words(b, 'bob')])
    await until('ann and bob converge', () => a.text.length === 240 && a.text.toString() === b.text.toString())
    const c = editor(args.tokens.cat)
    await synced(c, 'cat')
    await until('cat has the whole document', () => c.text.toString() === a.text.toString())
    done({ ann: a.text.toString(), bob: b.text.toString(), cat: c.text.toString() })
  },

  // Types `args.text` and waits until the room says every update is stored (then exits
  // without a goodbye: this editor never comes back).
  async write () {
    const a = editor(args.tokens.ann, { homeroom: true })
    await synced(a, 'writer')
    let sent = 0
    a.doc.on('update', (_u, origin) => { if (origin !== a.provider) sent++ })
    await type(a, args.text)
    // The step 2 answering the room's step 1 is the first update message on the socket.
    await until('every update saved', () => a.saved === sent + 1)
    done({ text: a.text.toString(), saved: a.saved })
  },

  // A fresh, empty editor reads the document.
  async read () {
    const a = editor(args.tokens.ann)
    await synced(a, 'reader')
    done({ text: a.text.toString() })
  },

  // Bob edits while offline; his edits merge when he reconnects.
  async offline () {
    const a = editor(args.tokens.ann)
    const b = editor(args.tokens.bob)
    await Promise.all([synced(a, 'ann'), synced(b, 'bob')])
    await type(a, 'shared ')
    await until('bob has ann\'s text', () => b.text.toString() === 'shared ')
    b.provider.disconnect()
    await type(b, 'offline-bob ')
    await type(a, 'online-ann ')
    await sleep(200)
    const apart = a.text.toString() !== b.text.toString()
    b.provider.connect()
    await until('they merge', () => a.text.toString() === b.text.toString() && a.text.length === 'shared offline-bob online-ann '.length)
    done({ apart, ann: a.text.toString(), bob: b.text.toString() })
  },

  // A read-only member types: refused, nobody sees it, a fresh reader does not get it.
  async readonly () {
    const w = editor(args.tokens.ann)
    const r = editor(args.tokens.reader, { homeroom: true })
    await Promise.all([synced(w, 'writer'), synced(r, 'reader')])
    await type(w, 'kept ')
    await until('reader has the text', () => r.text.toString() === 'kept ')
    await type(r, 'vandal')
    await until('the reader is told', () => r.refused.some(x => x.code === 'read_only'))
    await sleep(300)
    const fresh = editor(args.tokens.cat)
    await synced(fresh, 'fresh')
    done({ writer: w.text.toString(), fresh: fresh.text.toString(), reader: r.text.toString(), refused: r.refused })
  },

  // The backend writes into the document (POST .../update with the admin key); every
  // editor gets it.
  async serveredit () {
    const a = editor(args.tokens.ann)
    const b = editor(args.tokens.bob)
    await Promise.all([synced(a, 'ann'), synced(b, 'bob')])
    await type(a, 'by hand. ')
    await until('bob has it', () => b.text.toString() === 'by hand. ')
    // The server's edit: made on a copy that has the document, sent as the difference.
    const copy = new Y.Doc()
    Y.applyUpdate(copy, Y.encodeStateAsUpdate(a.doc))
    const before = Y.encodeStateVector(copy)
    copy.getText('text').insert(copy.getText('text').length, 'by the assistant.')
    const update = Y.encodeStateAsUpdate(copy, before)
    const http = args.url.replace(/^ws/, 'http')
    const resp = await fetch(`${http}/${args.room}/update`, {
      method: 'POST',
      headers: { authorization: `Bearer ${args.admin}`, 'content-type': 'application/octet-stream' },
      body: update
    })
    const status = resp.status
    const want = 'by hand. by the assistant.'
    await until('both editors have it', () => a.text.toString() === want && b.text.toString() === want)
    const json = await (await fetch(`${http}/${args.room}/json?types=text:text`, {
      headers: { authorization: `Bearer ${args.admin}` }
    })).json()
    done({ status, ann: a.text.toString(), bob: b.text.toString(), json })
  },

  // Holds an awareness state until killed (the child of `awareness`).
  async hold () {
    const a = editor(args.tokens.ann)
    a.provider.awareness.setLocalStateField('user', { name: 'ann' })
    await synced(a, 'holder')
    console.log('ready')
    await sleep(600000)
  },

  // Ann's process dies without a goodbye (SIGKILL); Bob sees her awareness go.
  async awareness () {
    const b = editor(args.tokens.bob)
    b.provider.awareness.setLocalStateField('user', { name: 'bob' })
    await synced(b, 'bob')
    const child = fork(new URL(import.meta.url).pathname, ['hold', argText], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
    const names = () => [...b.provider.awareness.getStates().values()].map(s => s.user?.name)
    await until('bob sees ann', () => names().includes('ann'), 15000)
    child.kill('SIGKILL')
    const killed = Date.now()
    await until('ann\'s state goes', () => !names().includes('ann'), 40000)
    done({ gone_ms: Date.now() - killed, names: names() })
  }
}

const run = scenarios[scenario]
if (!run) throw new Error(`no such scenario: ${scenario}`)
await run()
