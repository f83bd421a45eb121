import { HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { IdsRandom } from "../../src/adapters/ids/IdsRandom.js"
import { Settings } from "../../src/config.js"
import { publicationApi } from "../../src/roles/api.js"
import { ProcessServices } from "../../src/roles/ProcessServices.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { ApiMemory } from "../support/memory.js"
import { memoryStatusView } from "../support/status.js"

/**
 * The publication API over the in-memory stores, on a free loopback port; its base URL.
 * Ids are random UUIDs, so that they have hex letters to change the case of.
 */
const api = Effect.gen(function*() {
  const context = yield* Layer.build(
    publicationApi(0, Layer.merge(ApiMemory, IdsRandom), ApiMemory, memoryStatusView(ApiMemory)).pipe(
      Layer.provide(ProcessServices),
      Layer.provide(Settings.with({}))
    )
  )
  const server = Context.get(context, HttpServer.HttpServer)
  return `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
})

const answer = (response: Response) =>
  Effect.promise(async () => ({ status: response.status, body: (await response.json()) as Record<string, unknown> }))

/** POSTs `text` as it is, so that a test can send JSON that `JSON.stringify` would never write. */
const publishText = (base: string, key: string, text: string) =>
  Effect.flatMap(
    Effect.promise(() =>
      fetch(`${base}/v1/publications`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": key },
        body: text
      })
    ),
    answer
  )

const get = (base: string, path: string) => Effect.flatMap(Effect.promise(() => fetch(`${base}${path}`)), answer)

const validText = JSON.stringify(MaterialMother.wire(MaterialMother.command({ revision: 2 })))

describe("the publication API's reading of a body and of a request id", () => {
  it.scopedLive("a revision given twice is a 400 naming the duplicate, and nothing is written", () =>
    Effect.gen(function*() {
      const base = yield* api
      const refused = yield* publishText(
        base,
        "dup-1",
        validText.replace("\"revision\":2", "\"revision\":1,\"revision\":9")
      )
      expect(refused).toMatchObject({
        status: 400,
        body: {
          errors: [{
            field: "(body)",
            message: "has the member name \"revision\" twice in one object (I-JSON, RFC 7493 §2.3)"
          }]
        }
      })
      expect((yield* get(base, "/v1/materials/guides/quorum-queues")).status).toBe(404)
    }))

  it.scopedLive("a revision written 0.1e1 or over 2^53−1 is a 400 naming revision", () =>
    Effect.gen(function*() {
      const base = yield* api
      expect(yield* publishText(base, "lex-1", validText.replace("\"revision\":2", "\"revision\":0.1e1")))
        .toMatchObject({
          status: 400,
          body: { errors: [{ field: "revision", message: expect.stringContaining("must be written as an integer") }] }
        })
      expect(yield* publishText(base, "lex-2", validText.replace("\"revision\":2", "\"revision\":142305660233966512")))
        .toMatchObject({
          status: 400,
          body: { errors: [{ field: "revision", message: "must be at most 9007199254740991" }] }
        })
    }))

  it.scopedLive("GET /v1/publications/{request_id} finds a request by its id in upper case; a non-UUID is unknown", () =>
    Effect.gen(function*() {
      const base = yield* api
      const accepted = yield* publishText(base, "case-1", validText)
      const id = String(accepted.body.request_id)
      expect(id).toMatch(/^[0-9a-f-]{36}$/)
      expect(id.toUpperCase()).not.toBe(id)
      const shouted = yield* get(base, `/v1/publications/${id.toUpperCase()}`)
      expect(shouted).toMatchObject({ status: 200, body: { request_id: id, event_id: accepted.body.event_id } })
      expect((yield* get(base, "/v1/publications/nope")).status).toBe(404)
      expect((yield* get(base, `/v1/publications/${MaterialMother.eventId("unknown")}`)).status).toBe(404)
    }))
})
