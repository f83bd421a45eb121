/**
 * LoadGenerator: `POST /v1/publications` clients over keep-alive connections, each
 * request a new material with an Idempotency-Key of its own.
 * - `openLoop`: requests at a fixed offered rate whatever the answers (an open model,
 *   so a slow server is not hidden by a client that waits); each request's latency
 *   counts from the moment it was due, not from when a socket was free. At most
 *   `maxOutstanding` are unanswered at once: a request due beyond that is shed, counted
 *   and never sent, so an overloaded server cannot make the round run on for minutes.
 * - `closedLoop`: `clients` concurrent clients, each sending its next request as soon as
 *   the last one was answered, for a while.
 */
import { randomUUID } from "node:crypto"
import http from "node:http"
import { publicationRequest } from "./BenchMessages.js"

export interface Answer {
  readonly status: number
  readonly eventId: string | undefined
}

const post = (agent: http.Agent, port: number, body: string) =>
  new Promise<Answer>((resolve) => {
    const request = http.request({
      host: "127.0.0.1",
      port,
      path: "/v1/publications",
      method: "POST",
      agent,
      headers: {
        "content-type": "application/json",
        "idempotency-key": randomUUID(),
        "content-length": Buffer.byteLength(body)
      }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (c: Buffer) => chunks.push(c))
      response.on("end", () => {
        let eventId: string | undefined
        if (response.statusCode === 202) {
          try {
            eventId = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { event_id?: string }).event_id
          } catch {
            eventId = undefined
          }
        }
        resolve({ status: response.statusCode ?? 0, eventId })
      })
      response.on("error", () => resolve({ status: 0, eventId: undefined }))
    })
    request.setTimeout(60_000, () => request.destroy(new Error("timeout")))
    request.on("error", () => resolve({ status: 0, eventId: undefined }))
    request.end(body)
  })

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)))

export interface OpenLoopResult {
  /** Every request sent: when it was due (ms since the epoch), and its answer. */
  readonly sent: ReadonlyArray<{ readonly dueAt: number; readonly answer: Answer }>
  readonly shed: number
}

export const openLoop = async (o: {
  readonly port: number
  readonly rate: number
  readonly durationMs: number
  readonly maxOutstanding: number
  /** Names the round's materials, `bench/<tag>/<i>`. */
  readonly tag: string
}): Promise<OpenLoopResult> => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  const total = Math.round((o.rate * o.durationMs) / 1000)
  const interval = 1000 / o.rate
  const startAt = Date.now()
  const sent: Array<{ dueAt: number; answer: Answer }> = []
  const answers: Array<Promise<void>> = []
  let outstanding = 0
  let shed = 0
  let k = 0
  try {
    while (k < total) {
      const due = Math.min(total, Math.floor((Date.now() - startAt) / interval) + 1)
      for (; k < due; k++) {
        if (outstanding >= o.maxOutstanding) {
          shed++
          continue
        }
        const dueAt = startAt + k * interval
        outstanding++
        answers.push(
          post(agent, o.port, publicationRequest(o.tag, k)).then((answer) => {
            outstanding--
            sent.push({ dueAt, answer })
          })
        )
      }
      await sleep(startAt + k * interval - Date.now())
    }
    await Promise.all(answers)
    return { sent, shed }
  } finally {
    agent.destroy()
  }
}

export interface ClosedLoopResult {
  /** Latency of each answered request, ms. */
  readonly latencies: ReadonlyArray<number>
  readonly statuses: Readonly<Record<number, number>>
  readonly elapsedMs: number
  readonly eventIds: ReadonlyArray<string>
}

export const closedLoop = async (o: {
  readonly port: number
  readonly clients: number
  /** Stop after this long, or after `requests` requests, whichever comes first. */
  readonly durationMs: number
  readonly requests?: number
  readonly tag: string
}): Promise<ClosedLoopResult> => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.clients })
  const latencies: Array<number> = []
  const statuses: Record<number, number> = {}
  const eventIds: Array<string> = []
  const startedAt = Date.now()
  const endAt = startedAt + o.durationMs
  let issued = 0
  try {
    await Promise.all(Array.from({ length: o.clients }, async () => {
      while (Date.now() < endAt && (o.requests === undefined || issued < o.requests)) {
        const i = issued++
        const t0 = performance.now()
        const answer = await post(agent, o.port, publicationRequest(o.tag, i))
        latencies.push(performance.now() - t0)
        statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
        if (answer.eventId !== undefined) eventIds.push(answer.eventId)
      }
    }))
    return { latencies, statuses, elapsedMs: Date.now() - startedAt, eventIds }
  } finally {
    agent.destroy()
  }
}
