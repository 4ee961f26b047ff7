import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'
const url = process.argv[2]
const room = 'smoke-' + Date.now()
function editor(name) {
  const doc = new Y.Doc()
  const p = new WebsocketProvider(url, room, doc, { WebSocketPolyfill: WebSocket })
  p.awareness.setLocalStateField('user', { name })
  return { doc, p, text: doc.getText('text') }
}
const synced = (e) => new Promise(r => e.p.synced ? r() : e.p.once('sync', s => s && r()))
const a = editor('ann'), b = editor('bob')
await Promise.all([synced(a), synced(b)])
a.text.insert(0, 'hello ')
b.text.insert(0, 'world ')
await new Promise(r => setTimeout(r, 500))
console.log('a:', JSON.stringify(a.text.toString()), 'b:', JSON.stringify(b.text.toString()))
console.log('awareness seen by a:', [...a.p.awareness.getStates().values()].map(s => s.user?.name))
const c = editor('cat'); await synced(c)
console.log('c:', JSON.stringify(c.text.toString()))
for (const e of [a,b,c]) e.p.destroy()
process.exit(0)
