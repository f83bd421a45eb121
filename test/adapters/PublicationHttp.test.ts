import { HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, HashMap, Layer, Logger } from "effect"
import { Settings } from "../../src/config.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { publicationApi } from "../../src/roles/api.js"
import { ProcessServices } from "../../src/roles/ProcessServices.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory } from "../support/memory.js"
import { memoryStatusView } from "../support/status.js"

/** The publication API over the in-memory stores (no SQLite, no broker), with `transaction` in place of the memory one when given. */
const apiOver = (failing?: PersistenceError) =>
  Effect.gen(function*() {
    const stores = failing === undefined
      ? ApiMemory
      : Layer.merge(ApiMemory, Layer.succeed(Transaction, { run: () => Effect.fail(failing) }))
    const context = yield* Layer.build(
      publicationApi(0, stores, ApiMemory, memoryStatusView(ApiMemory)).pipe(
        Layer.provide(ProcessServices),
        Layer.provide(Settings.with({}))
      )
    )
    const server = Context.get(context, HttpServer.HttpServer)
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return `http://127.0.0.1:${port}`
  })

const publish = (base: string, key: string, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/v1/publications`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(body)
    })
    return {
      status: response.status,
      type: response.headers.get("content-type"),
      retryAfter: response.headers.get("retry-after"),
      body: (await response.json()) as Record<string, unknown>
    }
  })

describe("the publication API over the in-memory stores", () => {
  it.scopedLive("a store that is unavailable answers 503 problem+json with Retry-After, never a 500", () =>
    Effect.gen(function*() {
      const base = yield* apiOver(
        new PersistenceError({ operation: "transaction", kind: "unavailable", cause: new Error("database is locked") })
      )
      const answer = yield* publish(base, "k1", MaterialMother.wire(MaterialMother.command()))
      expect(answer).toMatchObject({
        status: 503,
        type: "application/problem+json",
        retryAfter: "1",
        body: { type: "urn:dostavka:problem:storage-unavailable", status: 503, title: "Storage is unavailable" }
      })
    }))

  it.scopedLive("202 for a new request; 409 for a stale revision; 422 for a reused key; each body as documented", () =>
    Effect.gen(function*() {
      const base = yield* apiOver()
      const accepted = yield* publish(base, "k1", MaterialMother.wire(MaterialMother.command({ revision: 2 })))
      expect(accepted).toMatchObject({
        status: 202,
        body: { status: "pending", request_id: expect.any(String), event_id: expect.any(String) }
      })
      expect(yield* publish(base, "k2", MaterialMother.wire(MaterialMother.command({ revision: 1 })))).toMatchObject({
        status: 409,
        type: "application/problem+json",
        body: { current_revision: 2, revision: 1, type: "urn:dostavka:problem:stale-revision" }
      })
      expect(yield* publish(base, "k1", MaterialMother.wire(MaterialMother.command({ revision: 3 })))).toMatchObject({
        status: 422,
        body: { errors: [{ field: "Idempotency-Key", message: "already used for a different request" }] }
      })
      expect(Object.keys(accepted.body).sort()).toEqual(["event_id", "request_id", "status"])
    }))

  it.scopedLive("every request gets one log line with method, path, status, duration and the request id it answered in X-Request-Id", () =>
    Effect.gen(function*() {
      const lines: Array<Record<string, unknown>> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ annotations, message }) => {
          const text = (Array.isArray(message) ? message : [message]).join(" ")
          if (text === "request") lines.push(Object.fromEntries(HashMap.toEntries(annotations)))
        })
      )
      const context = yield* Layer.build(
        publicationApi(0, ApiMemory, ApiMemory, memoryStatusView(ApiMemory)).pipe(
          Layer.provide(ProcessServices),
          Layer.provide(Settings.with({})),
          Layer.provide(capture)
        )
      )
      const server = Context.get(context, HttpServer.HttpServer)
      const base = `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
      const accepted = yield* Effect.promise(() =>
        fetch(`${base}/v1/publications`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": "log-1" },
          body: JSON.stringify(MaterialMother.wire(MaterialMother.command()))
        })
      )
      const missing = yield* Effect.promise(() => fetch(`${base}/v1/materials/none/such`))
      expect(lines).toEqual([
        {
          method: "POST",
          path: "/v1/publications",
          status: 202,
          durationMs: expect.any(Number),
          requestId: accepted.headers.get("x-request-id")
        },
        {
          method: "GET",
          path: "/v1/materials/none/such",
          status: 404,
          durationMs: expect.any(Number),
          requestId: missing.headers.get("x-request-id")
        }
      ])
      expect(accepted.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    }))
})
