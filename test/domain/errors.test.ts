import { describe, expect, it } from "@effect/vitest"
import { describeCause } from "../../src/domain/errors.js"

describe("describeCause", () => {
  it("joins an error and the errors it wraps, outermost first, skipping empty messages", () => {
    const inner = new Error("database is locked")
    const middle = new Error("", { cause: inner })
    const outer = new Error("Failed to execute statement", { cause: middle })
    expect(describeCause(outer)).toBe("Failed to execute statement: database is locked")
  })

  it("describes a value that is not an Error, and stops after five levels", () => {
    expect(describeCause("disk full")).toBe("disk full")
    let chain: unknown = new Error("6")
    for (const n of [5, 4, 3, 2, 1]) chain = new Error(String(n), { cause: chain })
    expect(describeCause(chain)).toBe("1: 2: 3: 4: 5")
  })
})
