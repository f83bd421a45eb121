import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Schema } from "effect"
import { findMaterial, findPublication } from "../../app/queries.js"
import { publishMaterial } from "../../app/publishMaterial.js"
import type { FieldIssue } from "../../domain/errors.js"
import { JsonContentType, mediaType } from "../../domain/Envelope.js"
import { MaxBodyBytes } from "../../domain/Material.js"
import { decodePublishMaterial, IdempotencyKey } from "../../domain/PublishMaterial.js"

/**
 * The largest request accepted, in bytes: a 1 MiB material body written entirely as
 * six-byte JSON escapes (`\u0000`), plus room for the other fields. Past this: 413.
 */
export const MaxRequestBytes = 7 * MaxBodyBytes

/**
 * A problem details response (RFC 9457, `application/problem+json`): `type` is a URN
 * naming the problem, `title` is the same for every occurrence, `detail` explains this
 * one, and `errors` lists the offending fields when there are any.
 */
export const problem = (
  status: number,
  kind: string,
  title: string,
  detail: string,
  extra: Record<string, unknown> = {}
) =>
  HttpServerResponse.unsafeJson(
    { type: `urn:dostavka:problem:${kind}`, title, status, detail, ...extra },
    { status, contentType: "application/problem+json" }
  )

const invalid = (issues: ReadonlyArray<FieldIssue>) =>
  problem(400, "invalid-request", "The request is invalid", issues.map((i) => `${i.field}: ${i.message}`).join("; "), {
    errors: issues
  })

const tooLarge = (detail: string, field?: string) =>
  problem(413, "too-large", "The request is too large", detail, field ? { errors: [{ field, message: detail }] } : {})

const utf8Bytes = (s: string) => Buffer.byteLength(s, "utf8")

const publish = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const key = Schema.decodeUnknownEither(IdempotencyKey)(request.headers["idempotency-key"])
  if (Either.isLeft(key)) {
    return invalid([{
      field: "Idempotency-Key",
      message: request.headers["idempotency-key"] === undefined
        ? "header is required"
        : "must be 1–200 printable ASCII characters"
    }])
  }
  if (mediaType(request.headers["content-type"]) !== JsonContentType) {
    return problem(415, "unsupported-media-type", "The request body must be JSON", `Content-Type is ${JSON.stringify(request.headers["content-type"] ?? null)}; send application/json`)
  }
  const declared = Number(request.headers["content-length"] ?? "0")
  if (declared > MaxRequestBytes) return tooLarge(`the body is ${declared} bytes; at most ${MaxRequestBytes} are accepted`)
  const text = yield* request.text.pipe(Effect.either)
  if (Either.isLeft(text)) {
    return String(text.left.cause).includes("maxBytes")
      ? tooLarge(`the body exceeds ${MaxRequestBytes} bytes`)
      : invalid([{ field: "(body)", message: "could not be read to its end" }])
  }
  let json: unknown
  try {
    json = JSON.parse(text.right)
  } catch (error) {
    return invalid([{ field: "(body)", message: `is not valid JSON: ${(error as Error).message}` }])
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return invalid([{ field: "(body)", message: "must be a JSON object" }])
  }
  const body = (json as { body?: unknown }).body
  if (typeof body === "string" && utf8Bytes(body) > MaxBodyBytes) {
    return tooLarge(`body is ${utf8Bytes(body)} bytes of UTF-8; at most ${MaxBodyBytes} are accepted`, "body")
  }
  const command = decodePublishMaterial(json)
  if (Either.isLeft(command)) return invalid(command.left.issues)

  return yield* publishMaterial(key.right, command.right).pipe(
    Effect.map((accepted) =>
      HttpServerResponse.unsafeJson(
        { request_id: accepted.requestId, event_id: accepted.eventId, status: accepted.status },
        { status: 202, headers: accepted.replayed ? { "idempotent-replayed": "true" } : {} }
      )
    ),
    Effect.catchTags({
      StaleRevision: (e) =>
        Effect.succeed(problem(
          409,
          "stale-revision",
          "The revision is not newer than the material's current one",
          `revision ${e.revision} of '${e.materialId}' is not greater than the current revision ${e.currentRevision}`,
          { material_id: e.materialId, revision: e.revision, current_revision: e.currentRevision }
        )),
      IdempotencyKeyReused: (e) =>
        Effect.succeed(problem(
          422,
          "idempotency-key-reused",
          "The idempotency key was used for a different request",
          `Idempotency-Key '${e.idempotencyKey}' was already used with another body; use a new key for a new request`,
          { errors: [{ field: "Idempotency-Key", message: "already used for a different request" }] }
        ))
    })
  )
}).pipe(HttpServerRequest.withMaxBodySize(Option.some(MaxRequestBytes)))

const notFound = (what: string) => problem(404, "not-found", "Not found", `${what} is not known here`)

const getMaterial = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const raw = new URL(request.url, "http://localhost").pathname.slice("/v1/materials/".length)
  let id: string
  try {
    id = decodeURIComponent(raw)
  } catch {
    return invalid([{ field: "material_id", message: "is not a valid percent-encoded path" }])
  }
  const found = yield* findMaterial(id)
  if (Option.isNone(found)) return notFound(`material '${id}'`)
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
})

const getPublication = Effect.gen(function*() {
  const { requestId } = yield* HttpRouter.params
  const found = yield* findPublication(requestId ?? "")
  if (Option.isNone(found)) return notFound(`publication request '${requestId}'`)
  const r = found.value
  return HttpServerResponse.unsafeJson({
    request_id: r.requestId,
    event_id: r.eventId,
    material_id: r.materialId,
    revision: r.revision,
    accepted_at: new Date(r.acceptedAtMs).toISOString(),
    status: r.status
  })
})

/**
 * The publication API (loopback only, no login):
 * - `POST /v1/publications` + `Idempotency-Key` → 202 `{request_id, event_id, status}`;
 *   400 bad JSON or fields, 413 over size, 415 not JSON, 409 stale revision, 422 key reused,
 *   503 storage (with `Retry-After`).
 * - `GET /v1/materials/{material_id}` (slashes allowed) → latest revision and its status.
 * - `GET /v1/publications/{request_id}` → the request and its status (`pending` / `published`).
 * Every error body is `application/problem+json` (RFC 9457); nothing is written on any error.
 */
export const publicationRouter = HttpRouter.empty.pipe(
  HttpRouter.post("/v1/publications", publish),
  HttpRouter.get("/v1/publications/:requestId", getPublication),
  HttpRouter.get("/v1/materials/*", getMaterial),
  HttpRouter.catchTag("PersistenceError", (e) =>
    Effect.succeed(
      problem(503, "storage-unavailable", "Storage is unavailable", `${e.operation} failed; retry later with the same Idempotency-Key`).pipe(
        HttpServerResponse.setHeader("retry-after", "1")
      )
    ))
)

/** The router as an app: unknown routes answer 404 problem+json too. */
export const publicationApp = Effect.catchTag(publicationRouter, "RouteNotFound", (e) =>
  Effect.succeed(notFound(`${e.request.method} ${e.request.url}`)))
