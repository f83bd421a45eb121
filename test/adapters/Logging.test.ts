import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { jsonLineLogger } from "../../src/adapters/logging/Logging.js"

describe("the JSON log format", () => {
  it.effect("writes one JSON object per line: time, level, message, and the annotations in snake_case", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const original = globalThis.console.error
      globalThis.console.error = (line: string) => lines.push(line)
      try {
        yield* Effect.logWarning("handler failed; retrying later").pipe(
          Effect.annotateLogs({
            role: "catalog",
            handler: "catalog",
            messageId: "m-1",
            correlationId: "c-1",
            materialId: "guides/x",
            revision: 3
          }),
          Effect.provide(Logger.replace(Logger.defaultLogger, jsonLineLogger))
        )
      } finally {
        globalThis.console.error = original
      }
      expect(lines).toHaveLength(1)
      const line = JSON.parse(lines[0]!)
      expect(line).toEqual({
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        level: "warning",
        message: "handler failed; retrying later",
        role: "catalog",
        handler: "catalog",
        message_id: "m-1",
        correlation_id: "c-1",
        material_id: "guides/x",
        revision: 3
      })
    }))
})
