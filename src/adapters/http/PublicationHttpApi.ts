import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { MaxBodyBytes } from "../../domain/Material.js"
import { IdempotencyKey, PublishMaterial, RequestId } from "../../domain/PublishMaterial.js"
import { OperationsGroup } from "./OperationsHttpApi.js"
import { StatusWire } from "./StatusWire.js"

/**
 * The largest request accepted, in bytes: a 1 MiB material body written entirely as
 * six-byte JSON escapes (`\u0000`), plus room for the other fields. Past this: 413.
 */
export const MaxRequestBytes = 7 * MaxBodyBytes

/** The media type of every error body (RFC 9457, "Problem Details for HTTP APIs"). */
export const ProblemContentType = "application/problem+json"

const constant = <const A extends string | number>(value: A) =>
  Schema.Literal(value).pipe(Schema.propertySignature, Schema.withConstructorDefault(() => value))

/**
 * The members every problem carries (RFC 9457 §3.1): `type`, a URN naming the problem;
 * `title`, the same for every occurrence; `status`, the HTTP status; `detail`, this
 * occurrence explained.
 */
const problemFields = <const Kind extends string, const Title extends string, const Status extends number>(
  kind: Kind,
  title: Title,
  status: Status
) => ({
  type: constant(`urn:dostavka:problem:${kind}` as const),
  title: constant(title),
  status: constant(status),
  detail: Schema.String
})

/** One field of a refused request and why, e.g. `{ field: "revision", message: "must be at least 1" }`. */
export const FieldIssue = Schema.Struct({
  field: Schema.String.annotations({
    description: "the field's wire name, a header name, or `(body)` for the body as a whole"
  }),
  message: Schema.String
})

/**
 * A problem's schema on the wire: the error class without its `_tag`, sent with `status`
 * as `application/problem+json`. Handlers fail with the class; the body is its fields.
 */
const onTheWire = <Self extends { readonly _tag: string }, Fields extends Schema.Struct.Fields>(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any encoded form: each error class has its own
  errorClass: Schema.Schema<Self, any> & { readonly fields: Fields; readonly _tag: Self["_tag"] },
  status: number,
  description: string
) => {
  const { _tag, ...wire } = errorClass.fields as Fields & { readonly _tag: unknown }
  return Schema.transform(Schema.Struct(wire as Omit<Fields, "_tag">), errorClass, {
    strict: false,
    decode: (body) => ({ ...body, _tag: errorClass._tag }),
    encode: ({ _tag: _, ...body }) => body
  }).annotations({
    ...HttpApiSchema.annotations({ status }),
    description,
    identifier: errorClass._tag
  }).pipe(HttpApiSchema.withEncoding({ kind: "Json", contentType: ProblemContentType }))
}

/** 400: a missing or bad `Idempotency-Key`, a body that is not strict UTF-8 JSON object, or bad fields. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  ...problemFields("invalid-request", "The request is invalid", 400),
  errors: Schema.Array(FieldIssue)
}) {}

/** 404: no such material, publication request, or route. */
export class NotFound
  extends Schema.TaggedError<NotFound>()("NotFound", problemFields("not-found", "Not found", 404))
{}

/** 405: the path exists, the method does not; `Allow` lists the methods that do. */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()(
  "MethodNotAllowed",
  problemFields("method-not-allowed", "Method not allowed", 405)
) {}

/** 409: the revision is not greater than the material's current one. */
export class StaleRevisionProblem extends Schema.TaggedError<StaleRevisionProblem>()("StaleRevisionProblem", {
  ...problemFields("stale-revision", "The revision is not newer than the material's current one", 409),
  material_id: Schema.String,
  revision: Schema.Number,
  current_revision: Schema.Number
}) {}

/** 413: the request is over `MaxRequestBytes`, or `body` over 1 MiB of UTF-8. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  ...problemFields("too-large", "The request is too large", 413),
  errors: Schema.optional(Schema.Array(FieldIssue))
}) {}

/** 415: the request's `Content-Type` is not `application/json`. */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  problemFields("unsupported-media-type", "The request body must be JSON", 415)
) {}

/** 422: the idempotency key was already used for a different request (IETF draft "The Idempotency-Key HTTP Header Field" §2.7). */
export class IdempotencyKeyReusedProblem extends Schema.TaggedError<IdempotencyKeyReusedProblem>()(
  "IdempotencyKeyReusedProblem",
  {
    ...problemFields("idempotency-key-reused", "The idempotency key was used for a different request", 422),
    errors: Schema.Array(FieldIssue)
  }
) {}

/** 503: the database failed or stayed locked; retry with the same `Idempotency-Key` (the answer carries `Retry-After`). */
export class StorageUnavailable extends Schema.TaggedError<StorageUnavailable>()(
  "StorageUnavailable",
  problemFields("storage-unavailable", "Storage is unavailable", 503)
) {}

/** Where an accepted request stands: its event waits in the outbox, or the broker confirmed it. */
const PublicationStatus = Schema.Literal("pending", "published")

/** 202 to `POST /v1/publications`. */
export const PublicationAccepted = Schema.Struct({
  request_id: Schema.String,
  event_id: Schema.String,
  status: PublicationStatus
})

/** 200 to `GET /v1/publications/{request_id}`. */
export const PublicationView = Schema.Struct({
  request_id: Schema.String,
  event_id: Schema.String,
  material_id: Schema.String,
  revision: Schema.Number,
  accepted_at: Schema.String.annotations({ description: "ISO 8601 UTC instant" }),
  status: PublicationStatus
})

/** 200 to `GET /v1/materials/{material_id}`: the latest revision, without its body. */
export const MaterialView = Schema.Struct({
  material_id: Schema.String,
  revision: Schema.Number,
  title: Schema.String,
  summary: Schema.String,
  event_id: Schema.String,
  published_at: Schema.String.annotations({ description: "ISO 8601 UTC instant" }),
  status: PublicationStatus
})

const storageUnavailable = onTheWire(
  StorageUnavailable,
  503,
  "The database failed or stayed locked; retry later with the same Idempotency-Key"
)
const notFound = onTheWire(NotFound, 404, "Not known here")
const invalidRequest = onTheWire(
  InvalidRequest,
  400,
  "A missing or bad Idempotency-Key, a body that is not a strict UTF-8 JSON object, or bad fields"
)

const publish = HttpApiEndpoint.post("publish", "/v1/publications")
  .setHeaders(Schema.Struct({ "idempotency-key": IdempotencyKey }))
  .setPayload(PublishMaterial)
  .addSuccess(PublicationAccepted, { status: 202 })
  .addError(invalidRequest)
  .addError(onTheWire(StaleRevisionProblem, 409, "The revision is not greater than the material's current one"))
  .addError(
    onTheWire(
      PayloadTooLarge,
      413,
      `The request is over ${MaxRequestBytes} bytes, or body over ${MaxBodyBytes} bytes of UTF-8`
    )
  )
  .addError(onTheWire(UnsupportedMediaType, 415, "The Content-Type is not application/json"))
  .addError(onTheWire(IdempotencyKeyReusedProblem, 422, "The Idempotency-Key was already used for a different request"))
  .addError(storageUnavailable)
  .annotate(OpenApi.Summary, "Publish a material at a revision")
  .annotate(
    OpenApi.Description,
    "Stores the revision, the request and the `material.published.v1` event in one transaction. The same " +
      "Idempotency-Key with the same body answers the same ids again with `Idempotent-Replayed: true`, and writes nothing."
  )

/**
 * The `request_id` of `GET /v1/publications/{request_id}`: a UUID in any letter case is
 * read in its canonical lower-case form (`RequestId`, RFC 9562 §4), the one the API
 * answers with, so `25248F40-…` finds the request `25248f40-…`; anything else is kept as
 * it is, and no request has it (404).
 */
const RequestIdSegment = Schema.Union(RequestId, Schema.String).annotations({
  description: "the request_id a 202 answered with; a UUID, in either letter case"
})

const getPublication = HttpApiEndpoint.get("getPublication", "/v1/publications/:request_id")
  .setPath(Schema.Struct({ request_id: RequestIdSegment }))
  .addSuccess(PublicationView)
  .addError(notFound)
  .addError(storageUnavailable)
  .annotate(OpenApi.Summary, "An accepted request and whether its event is published")

const getMaterial = HttpApiEndpoint.get("getMaterial", "/v1/materials/*")
  .addSuccess(MaterialView)
  .addError(invalidRequest)
  .addError(notFound)
  .addError(storageUnavailable)
  .annotate(OpenApi.Summary, "The latest revision of a material")
  .annotate(
    OpenApi.Description,
    "The rest of the path is the material id, slashes included: `/v1/materials/guides/quorum-queues`."
  )

/** The publication endpoints: publish, and read back what was accepted. */
export class PublicationsGroup
  extends HttpApiGroup.make("publications").add(publish).add(getPublication).add(getMaterial)
{}

/** `GET /v1/status`: the operator's view across the outbox, the broker and the inboxes. */
export class StatusGroup extends HttpApiGroup.make("status").add(
  HttpApiEndpoint.get("status", "/v1/status")
    .addSuccess(StatusWire)
    .annotate(
      OpenApi.Summary,
      "The outbox, each handler's queues and inbox side by side, and this process's broker connections"
    )
    .annotate(
      OpenApi.Description,
      "Queue figures come from the RabbitMQ management API (up to 5 s old) or, when it does not answer, a passive " +
        "queue.declare (unacked then null); `source` and `as_of` say which and when. Unknown figures are null, never 0."
    )
) {}

/**
 * The publication API's contract: every path, header, body, status and problem, in one
 * declared place. The server (`PublicationHttpHandlers`), the OpenAPI document at
 * `/openapi.json` and the page at `/docs` are all built from it. Every error is
 * `application/problem+json` (RFC 9457). The platform's own decode error is never sent:
 * the server turns it into `InvalidRequest`, so it is left out of the document too.
 */
export class PublicationHttpApi extends HttpApi.make("dostavka")
  .add(PublicationsGroup)
  .add(StatusGroup)
  .add(OperationsGroup)
  .addError(invalidRequest)
  .addError(notFound)
  .addError(onTheWire(MethodNotAllowed, 405, "The path exists, the method does not; Allow lists the methods that do"))
  .annotate(OpenApi.Title, "Dostavka publication API")
  .annotate(OpenApi.Version, "1")
  .annotate(
    OpenApi.Description,
    "Publishes `material.published.v1` facts through a transactional outbox. Loopback only, no login."
  )
  .annotate(OpenApi.Transform, (spec) => withoutPlatformDecodeError(spec))
{}

/**
 * The OpenAPI document without the platform's `HttpApiDecodeError`, which this server
 * never sends (it answers `InvalidRequest` instead): the generator files it, with our own
 * 400, under `application/json`; this keeps only ours, under `application/problem+json`.
 */
// The OpenAPI document is untyped JSON, walked by shape.
/* eslint-disable @typescript-eslint/no-explicit-any */
const withoutPlatformDecodeError = (spec: Record<string, any>): Record<string, any> => {
  const isPlatformError = (schema: { readonly $ref?: unknown }) =>
    schema.$ref === "#/components/schemas/HttpApiDecodeError"
  for (const path of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const operation of Object.values<Record<string, any>>(path)) {
      const response = operation.responses?.["400"]
      const json = response?.content?.["application/json"]
      if (json === undefined) continue
      delete response.content["application/json"]
      const ours = ((json.schema.anyOf ?? [json.schema]) as Array<Record<string, any>>).filter((s) =>
        !isPlatformError(s)
      )
      if (ours.length === 0) {
        if (Object.keys(response.content).length === 0) delete operation.responses["400"]
        continue
      }
      response.content[ProblemContentType] = { schema: ours.length === 1 ? ours[0] : { anyOf: ours } }
      response.description = ours[0]!.description ?? response.description
    }
  }
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete spec.components?.schemas?.[name]
  return spec
}
/* eslint-enable @typescript-eslint/no-explicit-any */
