/**
 * RawApiServer: the API suite's baseline, a process of its own — `POST /v1/publications`
 * on bare `node:http` and better-sqlite3, doing the kit's write in the plainest way: the
 * JSON parsed and its five fields checked by hand, then in ONE immediate transaction
 * (WAL, synchronous = FULL, like the kit's) the idempotency key looked up, the revision
 * checked, and the material, the request and the outbox row inserted; 202 with the ids.
 * No schema codecs, no problem+json, no metrics, no logs. `GET /readyz` answers 200.
 * Settings: BENCH_PORT, BENCH_DB (the database file).
 */
import Sqlite from "better-sqlite3"
import { randomUUID } from "node:crypto"
import http from "node:http"

const port = Number(process.env.BENCH_PORT)
const db = new Sqlite(process.env.BENCH_DB ?? "raw-api.db")
db.pragma("journal_mode = WAL")
db.pragma("synchronous = FULL")
db.exec(`
  CREATE TABLE IF NOT EXISTS materials (material_id TEXT NOT NULL, revision INTEGER NOT NULL, title TEXT NOT NULL,
    summary TEXT NOT NULL, body TEXT NOT NULL, event_id TEXT NOT NULL UNIQUE, published_at INTEGER NOT NULL,
    PRIMARY KEY (material_id, revision));
  CREATE TABLE IF NOT EXISTS publication_requests (idempotency_key TEXT PRIMARY KEY, request_hash TEXT NOT NULL,
    request_id TEXT NOT NULL UNIQUE, event_id TEXT NOT NULL UNIQUE, material_id TEXT NOT NULL, revision INTEGER NOT NULL,
    accepted_at INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS outbox (sequence INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL UNIQUE,
    correlation_id TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL, published_at INTEGER);`)

const findRequest = db.prepare<[string], { request_id: string; event_id: string; request_hash: string }>(
  "SELECT request_id, event_id, request_hash FROM publication_requests WHERE idempotency_key = ?"
)
const latest = db.prepare<[string], { revision: number | null }>(
  "SELECT MAX(revision) AS revision FROM materials WHERE material_id = ?"
)
const insertMaterial = db.prepare("INSERT INTO materials VALUES (?, ?, ?, ?, ?, ?, ?)")
const insertRequest = db.prepare("INSERT INTO publication_requests VALUES (?, ?, ?, ?, ?, ?, ?)")
const insertOutbox = db.prepare(
  "INSERT INTO outbox (message_id, correlation_id, type, body, created_at) VALUES (?, ?, ?, ?, ?)"
)

interface Command {
  readonly material_id: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly body: string
}

const isCommand = (v: unknown): v is Command => {
  const c = v as Partial<Command> | null
  return typeof c === "object" && c !== null && typeof c.material_id === "string" && Number.isInteger(c.revision) &&
    typeof c.title === "string" && typeof c.summary === "string" && typeof c.body === "string"
}

type Outcome = { readonly status: 202; readonly requestId: string; readonly eventId: string } | {
  readonly status: 409 | 422
}

const accept = db.transaction((key: string, raw: string, c: Command): Outcome => {
  const known = findRequest.get(key)
  if (known !== undefined) {
    return known.request_hash === raw
      ? { status: 202, requestId: known.request_id, eventId: known.event_id }
      : { status: 422 }
  }
  const held = latest.get(c.material_id)?.revision ?? 0
  if (c.revision <= held) return { status: 409 }
  const now = Date.now()
  const requestId = randomUUID()
  const eventId = randomUUID()
  insertMaterial.run(c.material_id, c.revision, c.title, c.summary, c.body, eventId, now)
  insertRequest.run(key, raw, requestId, eventId, c.material_id, c.revision, now)
  const event = {
    event_id: eventId,
    material_id: c.material_id,
    revision: c.revision,
    title: c.title,
    summary: c.summary,
    published_at: new Date(now).toISOString()
  }
  insertOutbox.run(eventId, requestId, "material.published.v1", JSON.stringify(event), now)
  return { status: 202, requestId, eventId }
})

const answer = (response: http.ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  response.end(text)
}

http.createServer((request, response) => {
  if (request.method === "GET" && request.url === "/readyz") return answer(response, 200, { status: "ready" })
  if (request.method !== "POST" || request.url !== "/v1/publications") return answer(response, 404, { status: 404 })
  const chunks: Array<Buffer> = []
  request.on("data", (c: Buffer) => chunks.push(c))
  request.on("end", () => {
    const key = request.headers["idempotency-key"]
    const raw = Buffer.concat(chunks).toString("utf8")
    let command: unknown
    try {
      command = JSON.parse(raw)
    } catch {
      return answer(response, 400, { status: 400 })
    }
    if (typeof key !== "string" || key === "" || !isCommand(command)) return answer(response, 400, { status: 400 })
    const outcome = accept.immediate(key, raw, command)
    if (outcome.status !== 202) return answer(response, outcome.status, { status: outcome.status })
    answer(response, 202, { request_id: outcome.requestId, event_id: outcome.eventId, status: "pending" })
  })
}).listen(port, "127.0.0.1")

process.on("SIGTERM", () => {
  db.close()
  process.exit(0)
})
