import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Integration tests talk to the real broker and SQLite files; each uses its own
    // prefix and data dir, so files may run in parallel.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default"]
  }
})
