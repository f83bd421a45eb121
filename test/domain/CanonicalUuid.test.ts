import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { EventId } from "../../src/domain/MaterialPublished.js"
import { RequestId } from "../../src/domain/PublishMaterial.js"

const upper = "25248F40-0E8B-4C9A-9F1D-3B7A5C2E6D10"
const lower = "25248f40-0e8b-4c9a-9f1d-3b7a5c2e6d10"

describe("UUIDs the kit keys on (RFC 9562 §4: any case in, lower case held)", () => {
  it("an event id in upper or mixed case decodes to the lower-case form, which encodes as it is", () => {
    const decode = Schema.decodeUnknownEither(EventId)
    expect(decode(upper)).toEqual(Either.right(lower))
    expect(decode("25248f40-0E8B-4c9a-9F1D-3b7a5c2e6d10")).toEqual(Either.right(lower))
    expect(decode(lower)).toEqual(Either.right(lower))
    expect(Schema.encodeSync(EventId)(EventId.make(lower))).toBe(lower)
    // What is no UUID is refused as before, whatever its case.
    for (const text of ["nope", "25248F40-0E8B-4C9A-9F1D-3B7A5C2E6D1", "25248G40-0E8B-4C9A-9F1D-3B7A5C2E6D10", ""]) {
      expect(Either.isLeft(decode(text))).toBe(true)
    }
  })

  it("a request id too", () => {
    expect(Schema.decodeUnknownEither(RequestId)(upper)).toEqual(Either.right(lower))
  })

  it("make refuses an upper-case id rather than keep a second spelling", () => {
    expect(() => EventId.make(upper)).toThrow(/lower case/)
  })
})
