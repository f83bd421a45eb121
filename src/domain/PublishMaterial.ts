import { Schema } from "effect"
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
