import { Either, ParseResult, Schema } from "effect"
import { type FieldIssue, InvalidCommand } from "./errors.js"
import { MaxListedIssues, truncate } from "./JsonInput.js"
import { AddressableMaterialId, Body, Revision, Summary, Title } from "./Material.js"

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

/** The idempotency key a client sends in the `Idempotency-Key` header: 1–200 printable ASCII characters. */
export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,200}$/, { message: () => "must be 1–200 printable ASCII characters" }),
  Schema.brand("IdempotencyKey")
)
export type IdempotencyKey = typeof IdempotencyKey.Type

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
 * Decodes the JSON value of a request body into a `PublishMaterial`, reporting every bad
 * field (not only the first) by its wire name, e.g. `material_id`, unknown fields first.
 * Fails with `InvalidCommand`.
 *
 * The cost of a refusal is linear in the input and its report is bounded: unknown keys
 * are counted in one pass before the schema sees the five known ones, at most
 * `MaxListedIssues` issues are listed, and each message is cut to `MaxIssueLength`. The
 * value is expected nested no deeper than `parseJson` allows.
 */
export const decodePublishMaterial = (input: unknown): Either.Either<PublishMaterial, InvalidCommand> => {
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
