import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Integration tests talk to the real broker and SQLite files; each uses its own
    // prefix and data dir, so files may run in parallel.
    // Most integration tests wait on the broker, timers or child processes, not the CPU: two
    // files at a time halve the wall time on a 2-core machine (the chaos run alone is ~4 min).
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default"]
  }
})
