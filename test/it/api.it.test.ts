import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { IdsRandom } from "../../src/adapters/ids/IdsRandom.js"
import { publishMaterial } from "../../src/app/publishMaterial.js"
import { PersistenceError } from "../../src/domain/errors.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"
import { ApiRole } from "../../src/roles/api.js"
import { ApiStores } from "../../src/roles/databases.js"
import { tempDataDir, uniquePrefix } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, countRows, get, post, startRoles, testSettings } from "../support/roles.js"

const valid = MaterialMother.wire(MaterialMother.command({ materialId: "news/2026/budget", revision: 2 }))
const rowsOf = (dir: string) => ({
  materials: countRows(dir, "api", "materials"),
  requests: countRows(dir, "api", "publication_requests"),
  outbox: countRows(dir, "api", "outbox")
})

describe("publication API over HTTP and SQLite", () => {
  it.scopedLive("answers each kind of request as documented and writes nothing on any error", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const { context } = yield* startRoles(ApiRole, testSettings(uniquePrefix("api"), dir))
      const base = baseUrl(context)

      const accepted = yield* post(base, "k-1", valid)
      expect(accepted.status).toBe(202)
      expect(accepted.body).toEqual({ request_id: expect.any(String), event_id: expect.any(String), status: "pending" })

      const replay = yield* post(base, "k-1", valid)
      expect(replay.status).toBe(202)
      expect(replay.body).toEqual(accepted.body)
      expect(replay.headers.get("idempotent-replayed")).toBe("true")

      const problems = [
        [422, "Idempotency-Key", yield* post(base, "k-1", { ...valid, title: "Other" })],
        [409, undefined, yield* post(base, "k-2", { ...valid, revision: 2 })],
        [409, undefined, yield* post(base, "k-3", { ...valid, revision: 1 })],
        [400, "Idempotency-Key", yield* post(base, undefined, valid)],
        [400, "(body)", yield* post(base, "k-4", undefined, "{\"material_id\": ")],
        [400, "(body)", yield* post(base, "k-4b", [valid])],
        [415, undefined, yield* post(base, "k-4c", valid, undefined, "text/plain")],
        [400, "revision", yield* post(base, "k-5", { ...valid, revision: "3" })],
        [400, "title", yield* post(base, "k-6", { ...valid, title: undefined })],
        [400, "material_id", yield* post(base, "k-7", { ...valid, material_id: "white space" })],
        [413, "body", yield* post(base, "k-8", { ...valid, revision: 3, body: "x".repeat(1024 * 1024 + 1) })],
        [
          413,
          undefined,
          yield* post(base, "k-9", undefined, JSON.stringify({ ...valid, body: "x".repeat(8 * 1024 * 1024) }))
        ]
      ] as const
      for (const [status, field, response] of problems) {
        expect({ status: response.status, type: response.headers.get("content-type") }).toEqual({
          status,
          type: "application/problem+json"
        })
        expect(response.body).toMatchObject({
          status,
          type: expect.stringMatching(/^urn:dostavka:problem:/),
          title: expect.any(String),
          detail: expect.any(String)
        })
        if (field !== undefined) expect(response.body.errors.map((e: { field: string }) => e.field)).toContain(field)
      }
      const escaped = yield* post(base, "k-10", { ...valid, revision: 3, body: "\u0001".repeat(1024 * 1024) })
      expect(escaped.status).toBe(202)
      expect(problems[1][2].body).toMatchObject({ material_id: "news/2026/budget", revision: 2, current_revision: 2 })
      expect(rowsOf(dir)).toEqual({ materials: 2, requests: 2, outbox: 2 })

      const publication = yield* get(base, `/v1/publications/${accepted.body.request_id}`)
      expect(publication.body).toMatchObject({
        event_id: accepted.body.event_id,
        material_id: "news/2026/budget",
        revision: 2,
        status: "pending"
      })
      const material = yield* get(base, `/v1/materials/news/2026/budget`)
      expect(material.body).toMatchObject({
        material_id: "news/2026/budget",
        revision: 3,
        status: "pending",
        event_id: escaped.body.event_id
      })
      expect(material.body).not.toHaveProperty("body")
      expect((yield* get(base, "/v1/materials/unknown")).status).toBe(404)
      expect((yield* get(base, "/v1/publications/nope")).status).toBe(404)
    }))

  it.scopedLive("a failure after the material and request rows are written leaves no partial rows in api.db", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const failingOutbox = Layer.effect(
        Outbox,
        Effect.map(Outbox, (outbox) => ({
          ...outbox,
          enqueue: () =>
            Effect.fail(new PersistenceError({ operation: "outbox.enqueue", kind: "unavailable", cause: "forced" }))
        }))
      )
      const error = yield* Effect.flip(publishMaterial(MaterialMother.key(), MaterialMother.command())).pipe(
        Effect.provide(failingOutbox),
        Effect.provide(Layer.mergeAll(ApiStores, OutboxSignal.layer, IdsRandom)),
        Effect.provide(testSettings(uniquePrefix("tx"), dir))
      )
      expect(error).toMatchObject({ _tag: "PersistenceError", operation: "outbox.enqueue" })
      expect(rowsOf(dir)).toEqual({ materials: 0, requests: 0, outbox: 0 })
    }))
})
