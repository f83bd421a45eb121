import { Schema } from "effect"

/**
 * A UUID read in any letter case and held in its canonical form: the 8-4-4-4-12 hex text
 * of RFC 9562 §4 in lower case. RFC 9562 §4 has the hex digits case-insensitive on input
 * and lower-case on output, so `25248F40-…` and `25248f40-…` are one UUID, and a key built
 * from either must be the same key.
 *
 * Decodes a string in the `Schema.UUID` form (any version, any case; `Expected UUID, …`
 * otherwise) to lower case; encodes the lower-case form as it is. The type side accepts
 * only the lower-case form, so `make` refuses an upper-case one rather than keep it.
 * (`Schema.UUID`'s pattern is ASCII-only, so no other character can lower-case into a
 * hex digit.)
 */
export const CanonicalUuid = Schema.transform(
  Schema.UUID,
  Schema.UUID.pipe(Schema.lowercased({ message: () => "must be a UUID in lower case (RFC 9562 §4)" })),
  { strict: true, decode: (uuid) => uuid.toLowerCase(), encode: (uuid) => uuid }
).annotations({ identifier: "CanonicalUuid" })
