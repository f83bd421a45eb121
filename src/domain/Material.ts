import { Schema } from "effect"
import { truncate } from "./JsonInput.js"

/** Length in Unicode code points, which is what a person means by "characters". */
const codePoints = (s: string): number => {
  let n = 0
  for (const _ of s) n++
  return n
}

const utf8 = new TextEncoder()

/** True when `s` has no lone UTF-16 surrogate, i.e. it can be stored and sent as UTF-8. */
const wellFormed = (s: string): boolean =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)
const wellFormedText = Schema.String.pipe(
  Schema.filter(wellFormed, { message: () => "must be valid Unicode (it has a lone surrogate)" })
)

/** 1 MiB: the largest body the API owner stores, in bytes of UTF-8. */
export const MaxBodyBytes = 1024 * 1024

/**
 * A material's id as any version of the kit has stored it: 1–200 characters of
 * `[A-Za-z0-9._/-]`, e.g. `guides/quorum-queues`. The ports take and give this; a new id
 * must also be an `AddressableMaterialId`.
 */
export const MaterialId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9._/-]{1,200}$/, {
    message: () => "must be 1–200 characters of A-Z a-z 0-9 . _ / -"
  }),
  Schema.brand("MaterialId")
)
export type MaterialId = typeof MaterialId.Type

/**
 * A `MaterialId` the kit accepts from outside (a request's body and path, an event on the
 * bus): its `/`-separated segments may not be empty, `.` or `..`, as a URL path would
 * normalize those away (RFC 3986 §5.2.4) and the material could never be read back by
 * its id. Rows stored before this rule (a request for `a//b`) still read as `MaterialId`.
 */
export const AddressableMaterialId = MaterialId.pipe(
  Schema.filter((id) => id.split("/").every((segment) => segment !== "" && segment !== "." && segment !== ".."), {
    message: () => "must not have empty, '.' or '..' segments between slashes"
  })
)

/**
 * A material's revision: an integer from 1 to 2^53−1 (9007199254740991, the largest
 * integer an I-JSON receiver is expected to read exactly, RFC 7493 §2.2); a newer
 * revision has a greater number. The bounds are checked before integrality, so a number
 * too large to be exact is told it is too large, not that it is no integer.
 */
export const Revision = Schema.Number.pipe(
  Schema.greaterThanOrEqualTo(1, { message: () => "must be at least 1" }),
  Schema.lessThanOrEqualTo(Number.MAX_SAFE_INTEGER, { message: () => `must be at most ${Number.MAX_SAFE_INTEGER}` }),
  Schema.int({ message: () => "must be an integer" }),
  Schema.brand("Revision")
)
export type Revision = typeof Revision.Type

/**
 * Why a revision written in JSON as `lexeme` (the number's text, RFC 8259 §6) is refused
 * however it parses, or `undefined`: it must be an integer literal, an optional `-` and
 * digits, with no fraction, no exponent, and not `-0`. `1.0`, `1e0`, `0.1e1` and
 * `1.0000000000000001` all parse to 1, so only the text shows that the sender did not
 * write the integer 1. Its value is then `Revision`'s to judge (`-3` is "at least 1",
 * `142305660233966512` "at most 9007199254740991").
 */
export const revisionLexemeIssue = (lexeme: string): string | undefined =>
  /^-?(?:0|[1-9][0-9]*)$/.test(lexeme) && lexeme !== "-0"
    ? undefined
    : `must be written as an integer, without a fraction, an exponent or a minus zero (it is written ${
      truncate(lexeme, 40)
    })`

/** A title: 1–500 characters. */
export const Title = wellFormedText.pipe(
  Schema.filter((s) => codePoints(s) >= 1 && codePoints(s) <= 500, {
    message: () => "must be 1–500 characters"
  })
)

/** A summary: at most 2,000 characters, may be empty. */
export const Summary = wellFormedText.pipe(
  Schema.filter((s) => codePoints(s) <= 2000, { message: () => "must be at most 2000 characters" })
)

/** The body: at most 1 MiB of UTF-8. Kept by the API owner only; never put on the bus. */
export const Body = wellFormedText.pipe(
  Schema.filter((s) => s.length <= MaxBodyBytes && utf8.encode(s).byteLength <= MaxBodyBytes, {
    message: () => `must be at most ${MaxBodyBytes} bytes of UTF-8`
  })
)

/** The rule every store of revisions follows: only a strictly newer revision replaces what is held. */
export const isNewer = (incoming: Revision, held: Revision | undefined): boolean =>
  held === undefined || incoming > held
