/**
 * LoadClients: the concurrent HTTP clients of a chaos run. Each works through its
 * `ClientPlan` at a steady pace (its share of the run's rate; a client that fell behind
 * does not rush to catch up), and retries a request that got no answer (connection
 * refused or reset, a timeout) or a 503 with the SAME Idempotency-Key and body, after
 * 100 ms doubling to 2 s (or the `Retry-After` the API sent), until it has a final answer
 * or `giveUpMs` passed. Every request is recorded with what it had to get and what it
 * got; every 202 with its time, so the run can tell when the API answered again after a
 * fault. A client done with its plan while faults are still being injected goes on with
 * more requests (`keepGoing`), so that no fault falls on an idle system.
 */
import type { SeededRandom } from "./SeededRandom.js"
import { type Intent, materialOf, textOf, type WorkloadPlan } from "./Workload.js"

export type Expected = "new" | "replay" | "stale" | "new-or-stale"
export type Outcome = "new" | "replay" | "stale" | "unexpected" | "gave-up"

export interface RequestRecord {
  readonly client: number
  readonly key: string
  readonly intent: Intent["kind"]
  readonly materialId: string
  readonly revision: number
  readonly body: string
  readonly expected: Expected
  /** For a repeat: the ids the first answer carried. */
  readonly expectedIds: { readonly eventId: string; readonly requestId: string } | undefined
  outcome: Outcome | undefined
  status: number | undefined
  eventId: string | undefined
  requestId: string | undefined
  attempts: number
  readonly sentAt: number
  answeredAt: number | undefined
  /** The material's revision a 409 named (`current_revision`). */
  currentRevision: number | undefined
  detail: string | undefined
}

export interface LoadOptions {
  readonly baseUrl: string
  /** Requests per second, all clients together. */
  readonly rate: number
  readonly giveUpMs: number
  /** Asked once a client has sent its planned requests: true to go on with more (faults are still running). */
  readonly keepGoing: () => boolean
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)))

type Attempt =
  | {
    readonly _tag: "answer"
    readonly status: number
    readonly replayed: boolean
    readonly retryAfterS: number | undefined
    readonly json: unknown
  }
  | { readonly _tag: "no-answer"; readonly reason: string }

const errorCode = (e: unknown): string => {
  const err = e as { name?: string; code?: string; cause?: { code?: string; message?: string } }
  if (err?.name === "TimeoutError") return "timeout"
  return err?.cause?.code ?? err?.code ?? err?.cause?.message ?? String(e)
}

const attempt = async (baseUrl: string, key: string, body: string): Promise<Attempt> => {
  try {
    const response = await fetch(`${baseUrl}/v1/publications`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body,
      signal: AbortSignal.timeout(15_000)
    })
    const text = await response.text()
    let json: unknown
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = text
    }
    const retryAfter = Number(response.headers.get("retry-after"))
    return {
      _tag: "answer",
      status: response.status,
      replayed: response.headers.get("idempotent-replayed") === "true",
      retryAfterS: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
      json
    }
  } catch (e) {
    return { _tag: "no-answer", reason: errorCode(e) }
  }
}

export class LoadClients {
  readonly records: Array<RequestRecord> = []
  /** Times of every 202, in the order they came. */
  readonly accepts: Array<number> = []
  /** Retries by reason: `ECONNREFUSED`, `ECONNRESET`, `timeout`, `HTTP 503`, … */
  readonly retries = new Map<string, number>()
  private stopped = false
  private readonly sharedMax = new Map<string, number>()
  finishedAt: number | undefined

  constructor(
    private readonly plan: WorkloadPlan,
    private readonly options: LoadOptions,
    private readonly random: SeededRandom
  ) {}

  stop() {
    this.stopped = true
  }

  async run(): Promise<void> {
    const t0 = Date.now()
    await Promise.all(this.plan.clients.map((p) => this.client(p.client, p.intents, p.more, t0)))
    this.finishedAt = Date.now()
  }

  private async client(c: number, planned: ReadonlyArray<Intent>, more: () => ReadonlyArray<Intent>, t0: number) {
    const clients = this.plan.clients.length
    const intervalMs = (1000 * clients) / this.options.rate
    const texts = this.random.fork(`texts-${c}`)
    const own = new Map<string, number>()
    const accepted: Array<RequestRecord> = []
    let shift = (c * intervalMs) / clients
    let slot = 0
    const intents = [...planned]
    for (let k = 0;; k++) {
      if (k === intents.length) {
        if (!this.options.keepGoing()) return
        intents.push(...more())
      }
      const intent = intents[k]!
      if (this.stopped) return
      const paced = intent.kind !== "next" || intent.paced
      if (paced) {
        const due = t0 + shift + slot++ * intervalMs
        const now = Date.now()
        if (now - due > 2_000) shift += now - due
        else await sleep(due - now)
      }
      const record = this.prepare(c, k, intent, own, accepted, texts)
      this.records.push(record)
      await this.send(record)
      if (record.outcome === "new" || record.outcome === "replay") {
        if (record.intent !== "repeat") accepted.push(record)
        const m = record.materialId
        if (record.intent === "contended") this.sharedMax.set(m, Math.max(this.sharedMax.get(m) ?? 0, record.revision))
        else own.set(m, Math.max(own.get(m) ?? 0, record.revision))
      } else if (record.outcome === "stale" && record.intent === "contended") {
        const current = record.currentRevision
        if (current !== undefined) {
          this.sharedMax.set(record.materialId, Math.max(this.sharedMax.get(record.materialId) ?? 0, current))
        }
      }
    }
  }

  private prepare(
    c: number,
    k: number,
    intent: Intent,
    own: Map<string, number>,
    accepted: ReadonlyArray<RequestRecord>,
    texts: SeededRandom
  ): RequestRecord {
    const base = {
      client: c,
      attempts: 0,
      sentAt: Date.now(),
      outcome: undefined,
      status: undefined,
      eventId: undefined,
      requestId: undefined,
      answeredAt: undefined,
      currentRevision: undefined,
      detail: undefined
    }
    const fresh = (materialId: string, revision: number, expected: Expected, kind: Intent["kind"]): RequestRecord => ({
      ...base,
      key: `chaos-${this.random.seed}-${c}-${k}`,
      intent: kind,
      materialId,
      revision,
      expected,
      expectedIds: undefined,
      body: JSON.stringify({
        material_id: materialId,
        revision,
        title: `${materialId} r${revision}`,
        summary: textOf(texts, texts.int(0, 200)),
        body: textOf(texts, texts.int(0, 1_500))
      })
    })
    switch (intent.kind) {
      case "next":
        return fresh(intent.material, (own.get(intent.material) ?? 0) + 1, "new", "next")
      case "skip":
        return fresh(intent.material, (own.get(intent.material) ?? 0) + 2, "new", "skip")
      case "stale": {
        const current = own.get(intent.material) ?? 0
        return current === 0
          ? fresh(intent.material, 1, "new", "next")
          : fresh(intent.material, current, "stale", "stale")
      }
      case "contended":
        return fresh(intent.material, (this.sharedMax.get(intent.material) ?? 0) + 1, "new-or-stale", "contended")
      case "repeat": {
        const earlier = accepted[Math.floor(intent.pick * accepted.length)]
        if (earlier === undefined || earlier.eventId === undefined || earlier.requestId === undefined) {
          const m = materialOf(c, 0)
          return fresh(m, (own.get(m) ?? 0) + 1, "new", "next")
        }
        return {
          ...base,
          key: earlier.key,
          intent: "repeat",
          materialId: earlier.materialId,
          revision: earlier.revision,
          body: earlier.body,
          expected: "replay",
          expectedIds: { eventId: earlier.eventId, requestId: earlier.requestId }
        }
      }
    }
  }

  private async send(record: RequestRecord) {
    const started = Date.now()
    let delay = 100
    for (;;) {
      record.attempts++
      const result = await attempt(this.options.baseUrl, record.key, record.body)
      const retryable = result._tag === "no-answer" || [502, 503, 504].includes(result.status)
      if (!retryable) {
        this.judge(record, result)
        return
      }
      const reason = result._tag === "no-answer" ? result.reason : `HTTP ${result.status}`
      this.retries.set(reason, (this.retries.get(reason) ?? 0) + 1)
      if (this.stopped || Date.now() - started > this.options.giveUpMs) {
        record.outcome = "gave-up"
        record.detail = `no final answer after ${record.attempts} attempts in ${
          Date.now() - started
        } ms; last: ${reason}`
        record.answeredAt = Date.now()
        return
      }
      const wait = result._tag === "answer" && result.retryAfterS !== undefined ? result.retryAfterS * 1000 : delay
      await sleep(wait)
      delay = Math.min(2_000, delay * 2)
    }
  }

  private judge(record: RequestRecord, result: Extract<Attempt, { _tag: "answer" }>) {
    const now = Date.now()
    record.status = result.status
    record.answeredAt = now
    const body = (typeof result.json === "object" && result.json !== null ? result.json : {}) as Record<string, unknown>
    const got: Outcome = result.status === 202
      ? (result.replayed ? "replay" : "new")
      : result.status === 409
      ? "stale"
      : "unexpected"
    if (result.status === 202) {
      this.accepts.push(now)
      record.eventId = typeof body.event_id === "string" ? body.event_id : undefined
      record.requestId = typeof body.request_id === "string" ? body.request_id : undefined
    }
    if (result.status === 409 && typeof body.current_revision === "number") {
      record.currentRevision = body.current_revision
    }
    // A request whose first answer was lost comes back as a replay when retried: that is "new" too.
    const fits = got === "unexpected"
      ? false
      : record.expected === "new"
      ? got === "new" || (got === "replay" && record.attempts > 1)
      : record.expected === "new-or-stale"
      ? got === "new" || got === "stale" || (got === "replay" && record.attempts > 1)
      : got === record.expected
    const sameIds = record.expectedIds === undefined ||
      (record.expectedIds.eventId === record.eventId && record.expectedIds.requestId === record.requestId)
    if (fits && sameIds) {
      record.outcome = got
    } else {
      record.outcome = "unexpected"
      record.detail = `expected ${record.expected}${
        record.expectedIds ? ` with ids ${record.expectedIds.eventId}` : ""
      }, got HTTP ${result.status}${result.replayed ? " (replayed)" : ""}: ${JSON.stringify(result.json).slice(0, 300)}`
    }
  }
}
