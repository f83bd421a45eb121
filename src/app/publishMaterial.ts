import { Clock, Effect, Option } from "effect"
import { createHash } from "node:crypto"
import { envelopeOf } from "../domain/Envelope.js"
import { IdempotencyKeyReused, StaleRevision } from "../domain/errors.js"
import { isNewer } from "../domain/Material.js"
import { EventId, MaterialPublishedV1 } from "../domain/MaterialPublished.js"
import type { IdempotencyKey, PublishMaterial } from "../domain/PublishMaterial.js"
import { Ids } from "../ports/Ids.js"
import { MaterialStore } from "../ports/MaterialStore.js"
import { Outbox } from "../ports/Outbox.js"
import { OutboxSignal } from "../ports/OutboxSignal.js"
import { type PublicationRequest, PublicationRequests } from "../ports/PublicationRequests.js"
import { Transaction } from "../ports/Transaction.js"
import { currentTraceparent } from "./tracing.js"

/** The `app_id` of every message the API owner produces. */
export const ApiAppId = "dostavka-api"

/** Where an accepted request stands: its event waits in the outbox, or the broker confirmed it. */
export type PublicationStatus = "pending" | "published"

export interface PublicationAccepted {
  readonly requestId: string
  readonly eventId: string
  readonly materialId: string
  readonly revision: number
  readonly status: PublicationStatus
  /** True when this answer repeats an earlier one for the same idempotency key. */
  readonly replayed: boolean
}

/** SHA-256 over the command's fields in a fixed order: equal iff the requests are the same. */
export const requestHash = (command: PublishMaterial): string =>
  createHash("sha256")
    .update(JSON.stringify([command.materialId, command.revision, command.title, command.summary, command.body]))
    .digest("hex")

/** The publication state of an event: `published` once the relay has its confirm. */
export const publicationStatus = (eventId: string) =>
  Effect.flatMap(Outbox, (outbox) => outbox.publishedAt(eventId)).pipe(
    Effect.map((at): PublicationStatus => (Option.isSome(at) && at.value !== null ? "published" : "pending"))
  )

/**
 * Accepts a `PublishMaterial` command under an idempotency key.
 *
 * In ONE transaction: reads the request by key (same key and same command → the earlier
 * answer, nothing written; same key, other command → `IdempotencyKeyReused`), checks the
 * revision is newer than the material's latest (else `StaleRevision`), then writes the
 * material revision, the request and the outbox row holding the `material.published.v1`
 * envelope, the request's and the event's ids taken from `Ids`. After the commit it rings the relay. Fails with `IdempotencyKeyReused`,
 * `StaleRevision` or `PersistenceError`; on any failure nothing is written.
 */
export const publishMaterial = Effect.fn("Api.publishMaterial")(function*(
  idempotencyKey: IdempotencyKey,
  command: PublishMaterial
) {
  const transaction = yield* Transaction
  const requests = yield* PublicationRequests
  const materials = yield* MaterialStore
  const outbox = yield* Outbox
  const ids = yield* Ids
  const hash = requestHash(command)

  const { replayed, request } = yield* transaction.run(Effect.gen(function*() {
    const earlier = yield* requests.byKey(idempotencyKey)
    if (Option.isSome(earlier)) {
      if (earlier.value.requestHash !== hash) return yield* new IdempotencyKeyReused({ idempotencyKey })
      return { replayed: true, request: earlier.value }
    }
    const latest = yield* materials.latest(command.materialId)
    const held = Option.getOrUndefined(latest)?.revision
    if (!isNewer(command.revision, held)) {
      return yield* new StaleRevision({
        materialId: command.materialId,
        revision: command.revision,
        currentRevision: held ?? 0
      })
    }
    const now = yield* Clock.currentTimeMillis
    const request: PublicationRequest = {
      idempotencyKey,
      requestHash: hash,
      requestId: yield* ids.uuid,
      eventId: EventId.make(yield* ids.uuid),
      materialId: command.materialId,
      revision: command.revision,
      acceptedAtMs: now
    }
    const event = MaterialPublishedV1.make({
      eventId: request.eventId,
      materialId: command.materialId,
      revision: command.revision,
      title: command.title,
      summary: command.summary,
      publishedAt: new Date(now)
    })
    yield* materials.insert({
      materialId: command.materialId,
      revision: command.revision,
      title: command.title,
      summary: command.summary,
      body: command.body,
      eventId: request.eventId,
      publishedAtMs: now
    })
    yield* requests.insert(request)
    const traceparent = yield* currentTraceparent
    yield* outbox.enqueue({ ...envelopeOf(event, request.requestId, ApiAppId), traceparent }, now)
    return { replayed: false, request }
  }))

  if (!replayed) yield* Effect.flatMap(OutboxSignal, (signal) => signal.notify)
  const status = yield* publicationStatus(request.eventId)
  return {
    requestId: request.requestId,
    eventId: request.eventId,
    materialId: request.materialId,
    revision: request.revision,
    status,
    replayed
  } satisfies PublicationAccepted
})
