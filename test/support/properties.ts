import fc from "fast-check"

/**
 * Cases per property: 1,000 by default, as CI runs them; `DOSTAVKA_PROPERTY_RUNS` changes
 * it for a longer hunt. fast-check prints the seed and the shrunk counterexample of a
 * failure; `DOSTAVKA_PROPERTY_SEED` replays a seed.
 */
export const propertyParameters = (): fc.Parameters<unknown> => ({
  numRuns: Number(process.env.DOSTAVKA_PROPERTY_RUNS ?? 1000),
  ...(process.env.DOSTAVKA_PROPERTY_SEED === undefined ? {} : { seed: Number(process.env.DOSTAVKA_PROPERTY_SEED) })
})

/** Arrays or objects nested `levels` deep around a leaf, as JSON text, built without recursion. */
export const nestedJson = (levels: number, kind: "array" | "object") =>
  kind === "array" ? "[".repeat(levels) + "0" + "]".repeat(levels) : "{\"n\":".repeat(levels) + "0" + "}".repeat(levels)

/** JSON text nested 1 to 100,000 levels deep. */
export const deepJson = fc.tuple(
  fc.integer({ min: 1, max: 100_000 }),
  fc.constantFrom("array" as const, "object" as const)
)
  .map(([levels, kind]) => nestedJson(levels, kind))

/** A JSON object with up to `max` keys that are no field of anything. */
export const manyUnknownKeys = (max: number) =>
  fc.integer({ min: 0, max }).map((n) => {
    const keys: Array<string> = []
    for (let i = 0; i < n; i++) keys.push(`"unknown_${i}":${i}`)
    return `{${keys.join(",")}}`
  })
