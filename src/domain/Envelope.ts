import { Either, ParseResult, Schema } from "effect"
import { UndecodableMessage } from "./errors.js"
import { parseJsonBytes, truncate } from "./JsonInput.js"
import { revisionLexemeIssue } from "./Material.js"
import { decodeMaterialPublishedV1, encodeMaterialPublishedV1, MaterialPublishedV1 } from "./MaterialPublished.js"

/**
 * Everything a message carries besides its routing: the AMQP basic properties the kit
 * sets on every publish, and the JSON body. The outbox stores exactly this, so a
 * re-publish after an unknown outcome sends the same bytes with the same `messageId`.
 *
 * AMQP mapping (RabbitMQ "Publishers" guide, message properties):
 * `message_id` ← messageId, `correlation_id` ← correlationId, `type` ← type,
 * `content_type` ← contentType, `timestamp` ← timestampMs / 1000 (AMQP timestamps are
 * seconds), `app_id` ← appId, header `x-schema-version` ← schemaVersion,
 * `delivery_mode` 2 (persistent) always.
 */
export const Envelope = Schema.Struct({
  /** The event id; stable across re-publishes, the key of every inbox. */
  messageId: Schema.String,
  /** The id of the API request that caused the event. */
  correlationId: Schema.String,
  /** The message type, e.g. `material.published.v1`; also the routing key. */
  type: Schema.String,
  schemaVersion: Schema.Number,
  contentType: Schema.String,
  /** When the event was created, ms since the epoch. */
  timestampMs: Schema.Number,
  /** Which program produced the message, e.g. `dostavka-api`. */
  appId: Schema.String,
  /** The JSON body, UTF-8. */
  body: Schema.String,
  /**
   * The W3C `traceparent` of the span that caused it (W3C Trace Context), when the
   * producing process traces; carried in the message's `traceparent` header. Stored as
   * `null` when absent.
   */
  traceparent: Schema.optionalWith(Schema.String, { nullable: true })
})
export interface Envelope extends Schema.Schema.Type<typeof Envelope> {}

export const JsonContentType = "application/json"
export const SchemaVersionHeader = "x-schema-version"

/** Builds the envelope of a `material.published.v1` event caused by request `correlationId`. */
export const envelopeOf = (event: MaterialPublishedV1, correlationId: string, appId: string): Envelope => ({
  messageId: event.eventId,
  correlationId,
  type: MaterialPublishedV1.type,
  schemaVersion: MaterialPublishedV1.schemaVersion,
  contentType: JsonContentType,
  timestampMs: event.publishedAt.getTime(),
  appId,
  body: encodeMaterialPublishedV1(event)
})

/** `application/json; charset=utf-8` → `application/json` (RFC 9110 §8.3.1: parameters follow `;`, case-insensitive type). */
export const mediaType = (contentType: string | undefined): string | undefined =>
  contentType?.split(";")[0]?.trim().toLowerCase()

/** The events this kit understands, by type and schema version. */
export type KnownEvent = MaterialPublishedV1

/**
 * True when a received `correlation_id` can be kept as it is: at most 255 characters (an
 * AMQP short string), and no U+FFFD, which is what amqplib leaves of bytes that were not
 * UTF-8. The kit's own are request ids (UUIDs).
 */
export const isKeepableCorrelationId = (value: string): boolean => value.length <= 255 && !value.includes("\uFFFD")

/** The longest `detail` of an `UndecodableMessage`, so that a refusal never grows with its input. */
export const MaxDetailLength = 1000

/**
 * Decodes a received message into a known event.
 * Fails with `UndecodableMessage` when the type or schema version (a number in the
 * `x-schema-version` header) is unknown, the media type is not `application/json`, or
 * (`bad-body`) the body is not strict UTF-8, not JSON, nested deeper than
 * `MaxJsonDepth`, has a member name twice in one object (`parseJson`), has a `revision`
 * not written as an integer literal (`revisionLexemeIssue`), or does not match the
 * schema (the detail names the field). Never throws, whatever the bytes and properties;
 * the detail is at most `MaxDetailLength` characters.
 */
export const decodeEvent = (
  message: {
    readonly type: string | undefined
    readonly schemaVersion: unknown
    readonly contentType: string | undefined
    readonly body: Uint8Array
  }
): Either.Either<KnownEvent, UndecodableMessage> => {
  if (message.type !== MaterialPublishedV1.type) {
    return Either.left(undecodable("unknown-type", `unknown message type ${quote(message.type)}`))
  }
  if (message.schemaVersion !== MaterialPublishedV1.schemaVersion) {
    return Either.left(
      undecodable("unknown-version", `unknown schema version ${quote(message.schemaVersion)} of ${message.type}`)
    )
  }
  if (mediaType(message.contentType) !== JsonContentType) {
    return Either.left(
      undecodable("bad-content-type", `content type ${quote(message.contentType)} is not ${JsonContentType}`)
    )
  }
  const json = parseJsonBytes(message.body)
  if (Either.isLeft(json)) return Either.left(undecodable("bad-body", `the body ${json.left.message}`))
  const revision = json.right.numberLexemes.get("revision")
  const written = revision === undefined ? undefined : revisionLexemeIssue(revision)
  if (written !== undefined) return Either.left(undecodable("bad-body", `["revision"] ${written}`))
  return decodeMaterialPublishedV1(json.right.value, { errors: "first" }).pipe(
    Either.mapLeft((error) => undecodable("bad-body", ParseResult.TreeFormatter.formatErrorSync(error)))
  )
}

const undecodable = (reason: UndecodableMessage["reason"], detail: string) =>
  new UndecodableMessage({ reason, detail: truncate(detail, MaxDetailLength) })

/** A property value as JSON for a refusal's detail, short whatever it holds (a header may be a deep table). */
const quote = (value: unknown): string => {
  if (value === undefined) return "(none)"
  if (typeof value === "string") return JSON.stringify(truncate(value, 100))
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value)
  return Array.isArray(value) ? "(a list)" : `(a value of type ${typeof value})`
}
