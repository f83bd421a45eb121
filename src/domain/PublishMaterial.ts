import { Either, ParseResult, Schema } from "effect"
import { InvalidCommand } from "./errors.js"
import { Body, MaterialId, Revision, Summary, Title } from "./Material.js"

/**
 * The command: "please publish this material at this revision". A request, which the
 * API may refuse (bad fields, a revision not newer than the current one, a reused
 * idempotency key). On the wire it is the JSON body of `POST /v1/publications`, with
 * snake_case keys.
 */
export class PublishMaterial extends Schema.Class<PublishMaterial>("PublishMaterial")({
  materialId: Schema.propertySignature(MaterialId).pipe(Schema.fromKey("material_id")),
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

/**
 * Decodes the JSON value of a request body into a `PublishMaterial`, reporting every bad
 * field (not only the first) by its wire name, e.g. `material_id`. Fails with `InvalidCommand`.
 */
export const decodePublishMaterial = (input: unknown): Either.Either<PublishMaterial, InvalidCommand> =>
  Schema.decodeUnknownEither(PublishMaterial)(input, { errors: "all", onExcessProperty: "error" }).pipe(
    Either.mapLeft((error) =>
      new InvalidCommand({
        issues: ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
          field: issue.path.length === 0 ? "(body)" : issue.path.map(String).join("."),
          message: issue.message
        }))
      })
    )
  )
