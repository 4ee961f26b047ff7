// The demo's document editor (served at /editor.html): a shared text for everyone who opens the
// same `?doc=` name, on the stock `y-websocket` provider and a plain <textarea> (the smallest
// Yjs binding there is; TipTap, CodeMirror or ProseMirror bindings connect the same way).
// `scripts/build-client` bundles it, with yjs and y-websocket, into client/public/editor.js.

import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'

const params = new URLSearchParams(location.search)
const name = params.get('doc') || 'welcome'
const user = params.get('user') || `guest-${Math.floor(Math.random() * 1000)}`
const server = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/docs`
const query = params.get('token') ? { token: params.get('token') } : {}

const ydoc = new Y.Doc()
const text = ydoc.getText('text')
const provider = new WebsocketProvider(server, name, ydoc, { params: query })
provider.awareness.setLocalStateField('user', { name: user })

const area = document.getElementById('text')
const status = document.getElementById('status')
const who = document.getElementById('who')
document.getElementById('doc').textContent = name

provider.on('status', ({ status: s }) => {
  status.textContent = s
  status.dataset.state = s
})
provider.on('sync', (synced) => {
  area.disabled = !synced
  if (synced) status.dataset.synced = 'true'
})
provider.on('connection-close', (event) => {
  if (event && event.code >= 4400 && event.code < 4500) status.textContent = `closed: ${event.reason}`
})

// The text to the textarea: the caret moves with the text around it (a remote insert before
// it pushes it on, a remote delete before it pulls it back).
function moved (index, delta) {
  let old = 0
  let now = index
  for (const op of delta) {
    if (op.retain) old += op.retain
    else if (op.insert) { if (old < index) now += op.insert.length }
    else if (op.delete) {
      if (old < index) now -= Math.min(op.delete, index - old)
      old += op.delete
    }
  }
  return now
}

text.observe((event) => {
  if (event.transaction.local) return
  const [start, end] = [area.selectionStart, area.selectionEnd]
  area.value = text.toString()
  area.setSelectionRange(moved(start, event.delta), moved(end, event.delta))
})

// The textarea to the text: the change between the old and the new value, as one delete and
// one insert (what a keystroke, a paste or a cut is).
area.addEventListener('input', () => {
  const old = text.toString()
  const now = area.value
  let head = 0
  while (head < old.length && head < now.length && old[head] === now[head]) head++
  let tail = 0
  while (tail < old.length - head && tail < now.length - head &&
    old[old.length - 1 - tail] === now[now.length - 1 - tail]) tail++
  ydoc.transact(() => {
    if (old.length - head - tail > 0) text.delete(head, old.length - head - tail)
    if (now.length - head - tail > 0) text.insert(head, now.slice(head, now.length - tail))
  })
})

// Who is here: one line per tab, from awareness.
const showWho = () => {
  who.replaceChildren(...[...provider.awareness.getStates().entries()].map(([client, state]) => {
    const li = document.createElement('li')
    li.textContent = state.user ? state.user.name : `client ${client}`
    if (client === ydoc.clientID) li.textContent += ' (you)'
    return li
  }))
}
provider.awareness.on('change', showWho)
showWho()

window.editor = { ydoc, provider, text }
