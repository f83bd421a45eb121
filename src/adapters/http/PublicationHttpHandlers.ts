import { HttpApiBuilder, HttpRouter, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { publishMaterial } from "../../app/publishMaterial.js"
import { PublicationQueries } from "../../app/queries.js"
import { StatusView } from "../../app/status.js"
import { JsonContentType, mediaType } from "../../domain/Envelope.js"
import { describeCause, type FieldIssue, type PersistenceError } from "../../domain/errors.js"
import { parseJsonBytes, truncate } from "../../domain/JsonInput.js"
import { AddressableMaterialId, MaxBodyBytes } from "../../domain/Material.js"
import { decodePublishMaterial, type IdempotencyKey } from "../../domain/PublishMaterial.js"
import { Supervisor } from "../../ports/Supervisor.js"
import { operationsAnswers } from "./OperationsHttpApi.js"
import {
  IdempotencyKeyReusedProblem,
  InvalidRequest,
  MaxRequestBytes,
  NotFound,
  PayloadTooLarge,
  PublicationHttpApi,
  StaleRevisionProblem,
  StorageUnavailable,
  UnsupportedMediaType
} from "./PublicationHttpApi.js"
import { toStatusWire } from "./StatusWire.js"

const invalid = (issues: ReadonlyArray<FieldIssue>) =>
  new InvalidRequest({ detail: issues.map((i) => `${i.field}: ${i.message}`).join("; "), errors: issues })

/**
 * Reads the request body straight from Node's stream, at most `max` bytes. Past that it
 * answers `PayloadTooLarge` at once and lets the rest drain unread; the response then
 * closes the connection. (The platform's own reader destroys the socket on overflow, so
 * a client that sent a large body without `Content-Length` would see a reset, not a 413.)
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, max: number) =>
  Effect.async<Buffer, PayloadTooLarge | InvalidRequest>((resume) => {
    const source = NodeHttpServerRequest.toIncomingMessage(request)
    const chunks: Array<Buffer> = []
    let size = 0
    let settled = false
    const settle = (outcome: Effect.Effect<Buffer, PayloadTooLarge | InvalidRequest>) => {
      if (settled) return
      settled = true
      resume(outcome)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        chunks.length = 0
        settle(Effect.fail(new PayloadTooLarge({ detail: `the body exceeds ${max} bytes` })))
      } else if (!settled) {
        chunks.push(chunk)
      }
    }
    const onEnd = () => settle(Effect.succeed(Buffer.concat(chunks, size)))
    const onError = () => settle(Effect.fail(invalid([{ field: "(body)", message: "could not be read to its end" }])))
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    source.once("aborted", onError)
    return Effect.sync(() => {
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("aborted", onError)
    })
  })

const unavailable = (role: string) => (error: PersistenceError) =>
  Effect.gen(function*() {
    yield* Effect.logError("storage unavailable; answering 503").pipe(
      Effect.annotateLogs({ operation: error.operation, kind: error.kind, cause: describeCause(error.cause) })
    )
    if (error.kind === "lost") yield* Effect.flatMap(Supervisor, (s) => s.halt(role, describeCause(error.cause)))
    return yield* new StorageUnavailable({
      detail: `${error.operation} failed; retry later with the same Idempotency-Key`
    })
  })

/**
 * `POST /v1/publications`: the checks in the order a client can fix them (media type,
 * size, strict UTF-8 JSON nested at most `MaxJsonDepth` with no member name twice in an
 * object, each a `(body)` issue; the body field's size; the fields, `revision` written as
 * an integer literal), then `publishMaterial`. Every refusal is bounded in size and costs
 * time linear in the request.
 */
const publish = (request: HttpServerRequest.HttpServerRequest, idempotencyKey: IdempotencyKey) =>
  Effect.gen(function*() {
    const contentType = request.headers["content-type"]
    if (mediaType(contentType) !== JsonContentType) {
      return yield* new UnsupportedMediaType({
        detail: `Content-Type is ${JSON.stringify(truncate(contentType ?? "(none)", 100))}; send application/json`
      })
    }
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > MaxRequestBytes) {
      return yield* new PayloadTooLarge({
        detail: `the body is ${declared} bytes; at most ${MaxRequestBytes} are accepted`
      })
    }
    const bytes = yield* readBody(request, MaxRequestBytes)
    const json = parseJsonBytes(bytes)
    if (Either.isLeft(json)) return yield* invalid([{ field: "(body)", message: json.left.message }])
    const body = typeof json.right.value === "object" && json.right.value !== null
      ? (json.right.value as { body?: unknown }).body
      : undefined
    if (typeof body === "string" && Buffer.byteLength(body, "utf8") > MaxBodyBytes) {
      const detail = `body is ${Buffer.byteLength(body, "utf8")} bytes of UTF-8; at most ${MaxBodyBytes} are accepted`
      return yield* new PayloadTooLarge({ detail, errors: [{ field: "body", message: detail }] })
    }
    const command = decodePublishMaterial(json.right)
    if (Either.isLeft(command)) return yield* invalid(command.left.issues)

    const accepted = yield* publishMaterial(idempotencyKey, command.right).pipe(
      Effect.catchTags({
        StaleRevision: (e) =>
          new StaleRevisionProblem({
            detail:
              `revision ${e.revision} of '${e.materialId}' is not greater than the current revision ${e.currentRevision}`,
            material_id: e.materialId,
            revision: e.revision,
            current_revision: e.currentRevision
          }),
        IdempotencyKeyReused: (e) =>
          new IdempotencyKeyReusedProblem({
            detail:
              `Idempotency-Key '${e.idempotencyKey}' was already used with another body; use a new key for a new request`,
            errors: [{ field: "Idempotency-Key", message: "already used for a different request" }]
          }),
        PersistenceError: unavailable("api")
      })
    )
    return HttpServerResponse.unsafeJson(
      { request_id: accepted.requestId, event_id: accepted.eventId, status: accepted.status },
      { status: 202, headers: accepted.replayed ? { "idempotent-replayed": "true" } : {} }
    )
  })

/**
 * The handlers of the `publications` group. Writes go through the role's stores and
 * `Transaction`; reads through `PublicationQueries`, which the role binds to a read-only
 * connection. A storage failure is logged and answered 503; a database file that was
 * removed under the process also halts the role (`Supervisor`).
 */
export const PublicationsLive = HttpApiBuilder.group(
  PublicationHttpApi,
  "publications",
  (handlers) =>
    Effect.gen(function*() {
      const queries = yield* PublicationQueries
      return handlers
        .handleRaw("publish", ({ headers, request }) => publish(request, headers["idempotency-key"]))
        .handle("getPublication", ({ path }) =>
          queries.findPublication(path.request_id).pipe(
            Effect.catchTag("PersistenceError", unavailable("api")),
            Effect.flatMap(Option.match({
              onNone: () =>
                new NotFound({ detail: `publication request '${truncate(path.request_id, 200)}' is not known here` }),
              onSome: (r) =>
                Effect.succeed({
                  request_id: r.requestId,
                  event_id: r.eventId,
                  material_id: r.materialId,
                  revision: r.revision,
                  accepted_at: new Date(r.acceptedAtMs).toISOString(),
                  status: r.status
                })
            }))
          ))
        .handleRaw("getMaterial", () =>
          Effect.gen(function*() {
            // The router has decoded the rest of the path; `.` and `..` segments in it
            // (encoded as %2e) are refused here, never resolved against the path.
            const id = (yield* HttpRouter.params)["*"] ?? ""
            const valid = Schema.decodeUnknownEither(AddressableMaterialId)(id)
            if (Either.isLeft(valid)) {
              return yield* invalid([{
                field: "material_id",
                message: truncate(
                  ParseResult.ArrayFormatter.formatErrorSync(valid.left)[0]?.message ?? "is not a material id"
                )
              }])
            }
            const found = yield* queries.findMaterial(valid.right).pipe(
              Effect.catchTag("PersistenceError", unavailable("api"))
            )
            if (Option.isNone(found)) {
              return yield* new NotFound({ detail: `material '${truncate(id, 200)}' is not known here` })
            }
            const m = found.value
            return HttpServerResponse.unsafeJson({
              material_id: m.materialId,
              revision: m.revision,
              title: m.title,
              summary: m.summary,
              event_id: m.eventId,
              published_at: new Date(m.publishedAtMs).toISOString(),
              status: m.status
            })
          }))
    })
)

/** The operations endpoints of the publication API (`/healthz`, `/readyz`, `/metrics`). */
export const PublicationOperationsLive = HttpApiBuilder.group(
  PublicationHttpApi,
  "operations",
  (handlers) =>
    Effect.map(operationsAnswers, (answers) =>
      handlers
        .handle("healthz", () => answers.healthz)
        .handleRaw("readyz", () => answers.readyz)
        .handleRaw("metrics", () => answers.metrics))
)

/** `GET /v1/status`, from the process's `StatusView`. */
export const PublicationStatusLive = HttpApiBuilder.group(
  PublicationHttpApi,
  "status",
  (handlers) => Effect.map(StatusView, (view) => handlers.handle("status", () => Effect.map(view.report, toStatusWire)))
)
