// The document scenarios the e2e trials play with stock Yjs editors: `y-websocket`'s own
// WebsocketProvider, unmodified from npm. The same code runs on Node (tests/docs/editors.mjs,
// run by tests/e2e/docs.rs) and in Chromium (tests/docs/browser.mjs, bundled and run by
// client/e2e/editor.test.ts). Each scenario returns what its editors ended with; the checks
// are the callers'. A scenario that cannot finish throws.
//
// args: {"url": "ws://127.0.0.1:PORT/docs", "room": "...", "tokens": {...}, "admin": "...",
//        "text": "..." (write)}; `WebSocket`: the constructor to use (Node 20 has none).

import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'

import { DocProvider } from '../../client/dist/yjs.js'

const SAVED = 100
const REFUSED = 101

export const sleep = (ms) => new Promise(resolve => setTimeout(resolve, ms))

/** Waits until `pred()` holds (polling), or throws `what` after `ms`. */
export async function until (what, pred, ms = 10000) {
  const end = Date.now() + ms
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`)
    await sleep(20)
  }
}

// What `wrangler dev`'s own proxy answers (503) when its pooled connection to the runtime dies
// under a request that is not a GET (kj's two 5 s keep-alive timeouts meet; the Worker never
// reads it; cloudflare/workers-sdk#14641). The proxy sends a lost GET again itself; `post` does
// the same for ours, up to 3 times. Any other answer is returned as is.
const DEV_PROXY_LOST = 'Your worker restarted mid-request.'
async function post (url, init) {
  for (let tries = 1; ; tries++) {
    const res = await fetch(url, { ...init, method: 'POST' })
    if (res.status !== 503 || tries === 3) return res
    if (!(await res.clone().text()).startsWith(DEV_PROXY_LOST)) return res
  }
}

// lib0's decoding of the two extension messages, by hand.
function readVarUint (decoder) {
  let num = 0
  let mult = 1
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

/** A y-protocols sync step 2 carrying `update`, as lib0 encodes it. */
function syncStep2 (update) {
  const len = []
  for (let n = update.length; ; n = Math.floor(n / 128)) {
    len.push(n < 128 ? n : (n % 128) | 128)
    if (n < 128) break
  }
  return new Uint8Array([0, 1, ...len, ...update])
}

export function scenarios (args, WebSocketImpl = globalThis.WebSocket) {
  /** A stock editor: a Y.Doc and its provider; `homeroom` asks for the extension messages. */
  function editor (token, { homeroom = false } = {}) {
    const doc = new Y.Doc()
    const params = { token }
    if (homeroom) params.homeroom = '1'
    const provider = new WebsocketProvider(args.url, args.room, doc, {
      WebSocketPolyfill: WebSocketImpl,
      params,
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

  const synced = (e, what) => until(`${what} synced`, () => e.provider.synced)
  const names = (e) => [...e.provider.awareness.getStates().values()].map(s => s.user?.name)

  /** Types `text` a few characters at a time, as a person would, at the end of the text. */
  async function type (e, text) {
    for (let i = 0; i < text.length; i += 3) {
      e.text.insert(e.text.length, text.slice(i, i + 3))
      await sleep(5)
    }
  }

  let watcher = null

  return {
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
      const result = { ann: a.text.toString(), bob: b.text.toString(), cat: c.text.toString() }
      for (const e of [a, b, c]) e.provider.destroy()
      return result
    },

    // Types `args.text` and waits until the room says every update is stored.
    async write () {
      const a = editor(args.tokens.ann, { homeroom: true })
      await synced(a, 'writer')
      let sent = 0
      a.doc.on('update', (_u, origin) => { if (origin !== a.provider) sent++ })
      await type(a, args.text)
      // The step 2 answering the room's step 1 is the first update message on the socket.
      await until('every update saved', () => a.saved === sent + 1)
      return { text: a.text.toString(), saved: a.saved }
    },

    // A fresh, empty editor reads the document.
    async read () {
      const a = editor(args.tokens.ann)
      await synced(a, 'reader')
      const result = { text: a.text.toString() }
      a.provider.destroy()
      return result
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
      await until('they merge', () => a.text.toString() === b.text.toString() &&
        a.text.length === 'shared offline-bob online-ann '.length)
      const result = { apart, ann: a.text.toString(), bob: b.text.toString() }
      for (const e of [a, b]) e.provider.destroy()
      return result
    },

    // A member nests `args.deep` maps, each in the one before, in one update: refused
    // `too_deep` before the room's Wasm could recurse through them (which reset the instance
    // and every room in it), so the victim's socket never drops. Another member nests exactly
    // `args.bound` (taken), the backend reads it as JSON, and the member deletes it all: the
    // room recurses `args.bound` levels and stays up.
    async deep () {
      const v = editor(args.tokens.ann)
      const m = editor(args.tokens.bob, { homeroom: true })
      const h = editor(args.tokens.cat, { homeroom: true })
      await Promise.all([synced(v, 'victim'), synced(m, 'mallory'), synced(h, 'honest')])
      let drops = 0
      v.provider.on('status', ({ status }) => { if (status === 'disconnected') drops++ })
      await type(v, 'before ')
      const chain = (e, n) => e.doc.transact(() => {
        let map = e.doc.getMap('m')
        for (let i = 0; i < n; i++) {
          const next = new Y.Map()
          map.set('k', next)
          map = next
        }
      })
      chain(m, args.deep)
      await until('mallory is answered', () => m.refused.length > 0 || m.saved > 1)
      await type(v, 'after')
      const fresh = editor(args.tokens.reader)
      await synced(fresh, 'fresh')
      await until('the fresh editor reads the victim', () => fresh.text.toString() === 'before after')
      chain(h, args.bound)
      await until('the honest chain is saved', () => h.saved > 1)
      await until('the victim holds it', () => v.doc.getMap('m').has('k'))
      const http = args.url.replace(/^ws/, 'http')
      const admin = { authorization: `Bearer ${args.admin}` }
      const json = await (await fetch(`${http}/${args.room}/json?types=m:map`, { headers: admin })).json()
      let depth = 0
      for (let at = json.m; at && at.k; at = at.k) depth++
      h.doc.getMap('m').delete('k')
      await until('the victim sees it deleted', () => !v.doc.getMap('m').has('k'))
      await type(v, '!')
      await until('the fresh editor still follows', () => fresh.text.toString() === 'before after!')
      const result = { drops, refused: m.refused, honestRefused: h.refused, json_depth: depth, victim: v.text.toString() }
      for (const e of [v, m, h, fresh]) e.provider.destroy()
      return result
    },

    // Two sockets that do not read while a writer writes 6 MB (text with emoji, typed and
    // deleted, map entries, pictures, paragraphs): the hog's reads nothing and answers nothing;
    // Mallory's blind one reads nothing either, yet sends a sync step 2 every 40 ms as if
    // answering the room's marks: nothing, her whole document, or her best guess (the writer's
    // last unit). She knows every block, as she reads the document on a socket of hers, a stock
    // editor. The readers (stock editors) answer every mark; the two others are closed.
    async hog () {
      const v = editor(args.tokens.ann)
      const w = editor(args.tokens.bob)
      const m = editor(args.tokens.cat)
      await Promise.all([synced(v, 'victim'), synced(w, 'writer'), synced(m, 'mallory')])
      let drops = 0
      for (const e of [v, w, m]) e.provider.on('status', ({ status }) => { if (status === 'disconnected') drops++ })
      const open = async (token) => {
        const ws = new WebSocketImpl(`${args.url}/${args.room}?token=${token}`)
        ws.binaryType = 'arraybuffer'
        const s = { ws, received: 0, close: null }
        ws.onmessage = (msg) => { s.received += msg.data.byteLength }
        ws.onclose = (c) => { s.close = { code: c.code, reason: c.reason } }
        ws.onerror = () => {} // a send after the room closed it; the close says the rest
        await until('a socket is open', () => ws.readyState === 1)
        await until('it got its first frames', () => s.received > 0)
        ws._socket.pause() // reads nothing more
        return s
      }
      const hog = await open(args.tokens.cat)
      const blind = await open(args.tokens.cat)
      const guess = () => {
        const sv = Y.decodeStateVector(Y.encodeStateVector(m.doc))
        sv.set(w.doc.clientID, sv.get(w.doc.clientID) - 1)
        return Y.encodeStateAsUpdate(m.doc, Y.encodeStateVector(sv))
      }
      const answers = [() => new Uint8Array([0, 0]), () => Y.encodeStateAsUpdate(m.doc), guess]
      const map = w.doc.getMap('map')
      const pictures = w.doc.getArray('pictures')
      const xml = w.doc.getXmlFragment('xml')
      const chunk = 'w😀'.repeat(9_000)
      for (let i = 0; i < 120; i++) {
        w.text.insert(0, chunk)
        w.text.delete(0, chunk.length)
        map.set(`k${i % 8}`, { i, note: 'n'.repeat(1000) })
        pictures.push([new Uint8Array(3000).fill(i)])
        xml.insert(xml.length, [new Y.XmlText(`paragraph ${i} 😀`)])
        if (i % 10 === 0) v.text.insert(0, 'v')
        if (blind.ws.readyState === 1) blind.ws.send(syncStep2(answers[i % 3]()))
        await sleep(40) // 1.25 MB/s: a reader on a loaded machine keeps up
      }
      w.text.insert(0, 'done')
      const view = (e) => JSON.stringify([e.text.toString(), e.doc.getMap('map').toJSON(),
        e.doc.getArray('pictures').length, e.doc.getXmlFragment('xml').toString()])
      await until('every reader has it all', () => [v, m].every(e => view(e) === view(w)), 40000)
      for (const s of [hog, blind]) s.ws._socket.resume()
      await until('both are closed', () => hog.close !== null && blind.close !== null, 20000)
      const result = {
        hog: { close: hog.close, received: hog.received },
        blind: { close: blind.close, received: blind.received },
        drops,
        same: [v, m].every(e => view(e) === view(w))
      }
      for (const e of [v, w, m]) e.provider.destroy()
      return result
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
      const result = { writer: w.text.toString(), fresh: fresh.text.toString(), reader: r.text.toString(), refused: r.refused }
      for (const e of [w, r, fresh]) e.provider.destroy()
      return result
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
      const resp = await post(`${http}/${args.room}/update`, {
        headers: { authorization: `Bearer ${args.admin}`, 'content-type': 'application/octet-stream' },
        body: update
      })
      const status = resp.status
      const want = 'by hand. by the assistant.'
      await until('both editors have it', () => a.text.toString() === want && b.text.toString() === want)
      const json = await (await fetch(`${http}/${args.room}/json?types=text:text`, {
        headers: { authorization: `Bearer ${args.admin}` }
      })).json()
      for (const e of [a, b]) e.provider.destroy()
      return { status, ann: a.text.toString(), bob: b.text.toString(), json }
    },

    // The backend keeps a version, the text is rewritten, Bob goes offline with the rewrite, the
    // version is restored: both editors read it again, Bob's sync does not bring the rewrite
    // back, and the version reads as kept.
    async versions () {
      const http = args.url.replace(/^ws/, 'http')
      const admin = { authorization: `Bearer ${args.admin}` }
      const a = editor(args.tokens.ann)
      const b = editor(args.tokens.bob)
      await Promise.all([synced(a, 'ann'), synced(b, 'bob')])
      await type(a, 'the first draft')
      await until('bob has it', () => b.text.toString() === 'the first draft')
      const saved = await post(`${http}/${args.room}/versions?name=v1`, { headers: admin })
      a.text.delete(0, a.text.length)
      await type(a, 'a rewrite nobody liked')
      await until('bob has the rewrite', () => b.text.toString() === 'a rewrite nobody liked')
      b.provider.disconnect()
      const restored = await post(`${http}/${args.room}/versions/v1/restore?types=text:text`, { headers: admin })
      await until('ann reads the version', () => a.text.toString() === 'the first draft')
      b.provider.connect()
      await until('bob reads it too', () => b.text.toString() === 'the first draft')
      await sleep(300)
      const list = await (await fetch(`${http}/${args.room}/versions`, { headers: admin })).json()
      const kept = new Y.Doc()
      const bytes = new Uint8Array(await (await fetch(`${http}/${args.room}/versions/v1`, { headers: admin })).arrayBuffer())
      Y.applyUpdate(kept, bytes)
      const result = {
        saved: saved.status,
        restored: restored.status,
        ann: a.text.toString(),
        bob: b.text.toString(),
        versions: list.versions.map(v => v.name),
        kept: kept.getText('text').toString()
      }
      for (const e of [a, b]) e.provider.destroy()
      return result
    },

    // Our provider (homeroom/yjs): its first token is refused (expired) and the next one taken;
    // an edit is "saving" until the room says it is stored; a read-only member hears its
    // refusal.
    async provider () {
      let calls = 0
      const token = async () => (calls++ === 0 ? args.tokens.expired : args.tokens.ann)
      const doc = new Y.Doc()
      const p = new DocProvider(args.url, args.room, doc, { token, WebSocketPolyfill: WebSocketImpl, baseMs: 200 })
      const events = []
      p.on('saved', (s) => events.push(s))
      await until('synced after a refused token', () => p.synced, 15000)
      await until('saved once synced', () => p.saved)
      doc.getText('text').insert(0, 'stored, not merely sent')
      const savingAtOnce = !p.saved
      await until('saved', () => p.saved)
      const rdoc = new Y.Doc()
      const r = new DocProvider(args.url, args.room, rdoc, { token: args.tokens.reader, WebSocketPolyfill: WebSocketImpl })
      const refusals = []
      r.on('refused', (x) => refusals.push(x))
      await until('reader synced', () => r.synced)
      rdoc.getText('text').insert(0, 'x')
      await until('the reader is told', () => refusals.length > 0)
      const result = { calls, savingAtOnce, saved: p.saved, events, refusals, text: doc.getText('text').toString(), reader: r.saved }
      p.destroy()
      r.destroy()
      return result
    },

    // Our provider given two endpoints of the deployment, the first one dead, and a server URL
    // on the dead one: it probes both, takes the one that answers, and syncs and saves through
    // it, under the server URL's path (the kind).
    async regions () {
      const live = new URL(args.url.replace(/^ws/, 'http')).origin
      const dead = 'http://127.0.0.1:9' // nothing listens there
      const doc = new Y.Doc()
      // A loaded test machine upgrades in up to 3 s (seen in CI's logs), past the 2.5 s a
      // probe has by default: then no probe wins and the first endpoint, the dead one, is taken.
      const p = new DocProvider('ws://127.0.0.1:9/docs', args.room, doc, {
        token: args.tokens.ann, WebSocketPolyfill: WebSocketImpl, endpoints: [dead, live],
        probe: { probeTimeoutMs: 12000 }
      })
      await until('synced through the live endpoint', () => p.synced, 15000)
      doc.getText('text').insert(0, 'through the endpoint that answered')
      await until('saved', () => p.saved)
      const result = { serverUrl: p.serverUrl, saved: p.saved, text: doc.getText('text').toString() }
      p.destroy()
      return result
    },

    // The notes kind's rules (examples/notes; `args.url` ends in /notes): a title past its bound
    // is refused and nobody sees it; the room's own edit (POST append, admin) reaches every
    // editor; a locked note refuses an open socket's update and opens read-only.
    async rules () {
      const http = args.url.replace(/^ws/, 'http')
      const admin = { authorization: `Bearer ${args.admin}` }
      const a = editor(args.tokens.ann, { homeroom: true })
      const b = editor(args.tokens.bob)
      await Promise.all([synced(a, 'ann'), synced(b, 'bob')])
      const title = (e) => e.doc.getText('title')
      const body = (e) => e.doc.getText('body')
      title(a).insert(0, 'Minutes')
      await until('bob has the title', () => title(b).toString() === 'Minutes')
      title(a).insert(7, ' of a meeting that went on'.repeat(10))
      await until('ann is told', () => a.refused.some(x => x.code === 'title_too_long'))
      const appended = await post(`${http}/${args.room}/append`, { headers: admin, body: 'Written by the room.' })
      await until('both have the room\'s edit', () =>
        body(a).toString() === 'Written by the room.' && body(b).toString() === 'Written by the room.')
      const locked = await post(`${http}/${args.room}/lock`, { headers: admin })
      await until('bob sees the lock', () => b.doc.getMap('meta').get('locked') === true)
      body(b).insert(0, 'bob, too late: ')
      const c = editor(args.tokens.cat, { homeroom: true })
      await synced(c, 'cat')
      body(c).insert(0, 'cat: ')
      await until('cat is told', () => c.refused.some(x => x.code === 'read_only'))
      await sleep(300)
      const json = await (await fetch(`${http}/${args.room}/json?types=title:text,body:text,meta:map`, { headers: admin })).json()
      const outline = await (await fetch(`${http}/${args.room}/outline?token=${args.tokens.cat}`)).json()
      const result = {
        bobTitle: title(b).toString(),
        refused: a.refused,
        appended: appended.status,
        locked: locked.status,
        json,
        outline
      }
      for (const e of [a, b, c]) e.provider.destroy()
      return result
    },

    // Ann holds an awareness state (until her process or page dies).
    async hold () {
      const a = editor(args.tokens.ann)
      a.provider.awareness.setLocalStateField('user', { name: 'ann' })
      await synced(a, 'holder')
      return { ready: true }
    },

    // Bob waits until he sees Ann (then someone kills her without a goodbye)...
    async watch () {
      const b = editor(args.tokens.bob)
      b.provider.awareness.setLocalStateField('user', { name: 'bob' })
      await synced(b, 'bob')
      await until('bob sees ann', () => names(b).includes('ann'), 15000)
      watcher = b
      return { names: names(b) }
    },

    // ... and then until her state goes.
    async gone () {
      const start = Date.now()
      await until('ann\'s state goes', () => !names(watcher).includes('ann'), 40000)
      return { gone_ms: Date.now() - start, names: names(watcher) }
    }
  }
}
