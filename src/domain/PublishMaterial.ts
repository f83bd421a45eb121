import { Either, ParseResult, Schema } from "effect"
import { CanonicalUuid } from "./CanonicalUuid.js"
import { type FieldIssue, InvalidCommand } from "./errors.js"
import { type JsonDocument, MaxListedIssues, truncate } from "./JsonInput.js"
import { AddressableMaterialId, Body, Revision, revisionLexemeIssue, Summary, Title } from "./Material.js"

/**
 * The command: "please publish this material at this revision". A request, which the
 * API may refuse (bad fields, a revision not newer than the current one, a reused
 * idempotency key). On the wire it is the JSON body of `POST /v1/publications`, with
 * snake_case keys.
 */
export class PublishMaterial extends Schema.Class<PublishMaterial>("PublishMaterial")({
  materialId: Schema.propertySignature(AddressableMaterialId).pipe(Schema.fromKey("material_id")),
  revision: Revision,
  title: Title,
  summary: Summary,
  body: Body
}) {}

/**
 * The idempotency key a client sends in the `Idempotency-Key` header: 1–200 printable
 * ASCII characters. Opaque: compared exactly as sent, letter case included, even when it
 * looks like a UUID (`Key-1` and `key-1` are two keys), since only the client knows what
 * it means.
 */
export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,200}$/, { message: () => "must be 1–200 printable ASCII characters" }),
  Schema.brand("IdempotencyKey")
)
export type IdempotencyKey = typeof IdempotencyKey.Type

/**
 * The id the API gives a request it accepts (the `request_id` of its answer, the
 * `correlation_id` of its event): a UUID, read in any letter case and held in lower case
 * (`CanonicalUuid`, RFC 9562 §4), so a request is found however a client spelled its id.
 */
export const RequestId = CanonicalUuid.pipe(Schema.brand("RequestId", { identifier: "RequestId" }))

/** The command's fields as a client spells them, in the order refusals list them, with their JSON types. */
const fieldTypes = {
  material_id: "string",
  revision: "number",
  title: "string",
  summary: "string",
  body: "string"
} as const
export const PublishMaterialFields = Object.keys(fieldTypes) as ReadonlyArray<keyof typeof fieldTypes>
const isField = (key: string): key is keyof typeof fieldTypes => Object.hasOwn(fieldTypes, key)

const decodeKnownFields = Schema.decodeUnknownEither(PublishMaterial)

/**
 * The first `MaxListedIssues` of `total` issues; when some are left out, one last
 * `(body)` issue says how many, so a refusal stays small whatever the input's size.
 */
const boundIssues = (listed: ReadonlyArray<FieldIssue>, total: number): ReadonlyArray<FieldIssue> => {
  const shown = listed.slice(0, MaxListedIssues)
  return total > shown.length
    ? [...shown, { field: "(body)", message: `and ${total - shown.length} more issues` }]
    : shown
}

/**
 * Decodes a request body, parsed by `parseJson`, into a `PublishMaterial`, reporting every
 * bad field (not only the first) by its wire name, e.g. `material_id`, unknown fields
 * first. A `revision` must also be written as an integer literal (`revisionLexemeIssue`:
 * `1.0` and `1e0` are refused, though they parse to 1); a document built otherwise than
 * by `parseJson` has no lexemes, and only the value is judged. Fails with `InvalidCommand`.
 *
 * The cost of a refusal is linear in the input and its report is bounded: unknown keys
 * are counted in one pass before the schema sees the five known ones, at most
 * `MaxListedIssues` issues are listed, and each message is cut to `MaxIssueLength`. The
 * value is expected nested no deeper than `parseJson` allows.
 */
export const decodePublishMaterial = (document: JsonDocument): Either.Either<PublishMaterial, InvalidCommand> => {
  const input = document.value
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return Either.left(new InvalidCommand({ issues: [{ field: "(body)", message: "must be a JSON object" }] }))
  }
  const issues: Array<FieldIssue> = []
  const known: Record<string, unknown> = {}
  const reported = new Set<string>()
  let unknownFields = 0
  for (const [key, value] of Object.entries(input)) {
    if (!isField(key)) {
      if (unknownFields++ < MaxListedIssues) {
        issues.push({
          field: truncate(key, 100),
          message: `is not a field of this request (${PublishMaterialFields.join(", ")})`
        })
      }
    } else if (typeof value === "object" && value !== null) {
      // Said here, in a few words: the schema's own message would print the whole value.
      issues.push({
        field: key,
        message: `must be a ${fieldTypes[key]}, not ${Array.isArray(value) ? "an array" : "an object"}`
      })
      reported.add(key)
    } else if (key === "revision" && typeof value === "number" && document.numberLexemes.has(key)) {
      const written = revisionLexemeIssue(document.numberLexemes.get(key)!)
      if (written === undefined) known[key] = value
      else {
        issues.push({ field: key, message: truncate(written) })
        reported.add(key)
      }
    } else {
      known[key] = value
    }
  }
  const decoded = decodeKnownFields(known, { errors: "all" })
  if (Either.isLeft(decoded)) {
    for (const issue of ParseResult.ArrayFormatter.formatErrorSync(decoded.left)) {
      const field = issue.path.length === 0 ? "(body)" : issue.path.map(String).join(".")
      if (!reported.has(field)) issues.push({ field, message: truncate(issue.message) })
    }
  }
  if (issues.length === 0 && Either.isRight(decoded)) return Either.right(decoded.right)
  const schemaIssues = issues.length - Math.min(unknownFields, MaxListedIssues)
  return Either.left(new InvalidCommand({ issues: boundIssues(issues, unknownFields + schemaIssues) }))
}
