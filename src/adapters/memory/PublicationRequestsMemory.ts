import { Effect, Layer, Option, Ref } from "effect"
import { type PublicationRequest, PublicationRequests } from "../../ports/PublicationRequests.js"
import { MemoryDatabase, uniqueViolation } from "./MemoryDatabase.js"

/** The in-memory twin of `PublicationRequestsSqlite`. */
export const PublicationRequestsMemory = Layer.effect(
  PublicationRequests,
  Effect.gen(function*() {
    const db = yield* MemoryDatabase
    const table = yield* db.table<ReadonlyArray<PublicationRequest>>("publication_requests", [])
    return {
      byKey: (key) =>
        Effect.map(Ref.get(table), (rows) => Option.fromNullable(rows.find((r) => r.idempotencyKey === key))),
      byId: (id) => Effect.map(Ref.get(table), (rows) => Option.fromNullable(rows.find((r) => r.requestId === id))),
      insert: (request) =>
        Effect.flatMap(
          Ref.get(table),
          (rows) =>
            rows.some((r) =>
                r.idempotencyKey === request.idempotencyKey || r.requestId === request.requestId ||
                r.eventId === request.eventId
              )
              ? Effect.fail(uniqueViolation("requests.insert", "publication_requests.idempotency_key"))
              : Ref.set(table, [...rows, request])
        )
    }
  })
)
