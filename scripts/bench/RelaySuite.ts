/**
 * The relay suite: N pending outbox rows → all confirmed by the broker (and, for the kit,
 * marked published), in messages per second. Variants, run back to back in each round,
 * each from empty handler queues:
 * - kit: the kit's own `RelayRole` (`runRelay` → `drainOnce`, `OutboxSqlite`,
 *   `EventBusAmqp`) in this process, over an `api.db` preloaded with N rows; the clock
 *   starts when it logs `relay holds the lease` and stops when a read-only connection
 *   finds no pending row (polled every 5 ms);
 * - ceiling: raw amqplib, streaming confirms with the relay's window in flight;
 * - floor: raw amqplib, one publish at a time, each waiting for its confirm;
 * - rascal: rascal's publication with its defaults (confirm channels from a pool), the
 *   same window of publications awaiting their confirm.
 * Every message is the kit's (≈1 KiB JSON, persistent, mandatory) to the events exchange,
 * which routes it to both handler queues.
 */
import Sqlite from "better-sqlite3"
import { Effect } from "effect"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { databaseFile } from "../../src/adapters/sqlite/Database.js"
import { MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"
import { RelayRole } from "../../src/roles/relay.js"
import { type BenchBroker, purgeQueues } from "./BenchBroker.js"
import { attempt } from "./BenchFailure.js"
import { envelopes, publishesOf } from "./BenchMessages.js"
import { type BenchOptions, runs } from "./BenchOptions.js"
import { compare, runRounds, type Variant } from "./Comparison.js"
import { profiled } from "./CpuProfiler.js"
import type { SuiteResult } from "./Figures.js"
import { declareKitTopology, kitRound, type KitSettings, settingsOf, writeOutbox } from "./KitInProcess.js"
import { openRascal, rascalPublish } from "./RascalClient.js"
import { openConfirmSession, publishEach, publishStreaming } from "./RawAmqp.js"
import { mark, resultOf } from "./RoundClock.js"

const Prefix = "bench-relay"
const LeaseMarker = "relay holds the lease"

/** Polls `api.db` read-only until no row is pending; the time it found none. */
const untilNothingPending = (file: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Sqlite(file, { readonly: true })),
    (db) => {
      const pending = db.prepare("SELECT 1 FROM outbox WHERE published_at IS NULL AND parked_at IS NULL LIMIT 1")
      return Effect.gen(function*() {
        while (pending.get() !== undefined) yield* Effect.sleep("5 millis")
        return mark()
      })
    },
    (db) => Effect.sync(() => db.close())
  )

export const relaySuite = (options: BenchOptions, broker: BenchBroker) =>
  Effect.gen(function*() {
    const { sizes } = options
    const s: KitSettings = { amqpUrl: broker.amqpUrl, prefix: Prefix, dataDir: "unused" }
    const window = (yield* settingsOf(s)).relayWindow
    const names = namesOf(Prefix)
    yield* declareKitTopology(s)
    const rows = envelopes("relay", sizes.relayMessages)
    const publishes = publishesOf(rows, { exchange: names.exchange })
    const floorPublishes = publishes.slice(0, sizes.relayFloorMessages)
    const rascalPublishes = publishes.slice(0, sizes.relayRascalMessages)
    const queues = [names.queue("catalog"), names.queue("audit")]

    const every: ReadonlyArray<Variant> = [
      {
        name: "kit",
        label: "kit relay (RelayRole: OutboxSqlite + EventBusAmqp)",
        note: `${rows.length} rows, window ${window}`,
        round: (n) =>
          kitRound({
            what: "kit relay",
            prefix: Prefix,
            amqpUrl: broker.amqpUrl,
            role: RelayRole,
            marker: LeaseMarker,
            count: rows.length,
            prepare: (s) => writeOutbox(s, rows, { parked: false }),
            until: (s) => untilNothingPending(databaseFile(s.dataDir, "api")),
            profile: profiled(options.cpuProfileDir, `relay-kit-round${n}`)
          })
      },
      {
        name: "ceiling",
        label: "raw amqplib, streaming confirms (ceiling)",
        note: `${publishes.length} msgs, window ${window}`,
        round: () =>
          attempt("raw streaming confirms", async () => {
            const session = await openConfirmSession(broker.amqpUrl)
            try {
              const startedAt = mark()
              await publishStreaming(session, publishes, window)
              return resultOf(publishes.length, startedAt)
            } finally {
              await session.close()
            }
          })
      },
      {
        name: "floor",
        label: "raw amqplib, publish and wait each (floor)",
        note: `${floorPublishes.length} msgs, 1 in flight`,
        round: () =>
          attempt("raw publish-and-wait", async () => {
            const session = await openConfirmSession(broker.amqpUrl)
            try {
              const startedAt = mark()
              await publishEach(session, floorPublishes)
              return resultOf(floorPublishes.length, startedAt)
            } finally {
              await session.close()
            }
          })
      },
      {
        name: "rascal",
        label: "rascal, confirmed publications (its defaults)",
        note: `${rascalPublishes.length} msgs, ${window} awaiting confirm`,
        round: () =>
          attempt("rascal publish", async () => {
            const rascal = await openRascal({
              url: broker.amqpUrl,
              vhost: broker.vhost,
              exchange: names.exchange,
              routingKey: MaterialPublishedV1.type,
              queue: names.queue("catalog"),
              prefetch: 50
            })
            try {
              const startedAt = mark()
              await rascalPublish(rascal, rascalPublishes, window)
              return resultOf(rascalPublishes.length, startedAt)
            } finally {
              await rascal.shutdown()
            }
          })
      }
    ]
    const variants = every.filter((v) => runs(options, v.name))

    const results = yield* runRounds("relay", sizes.rounds, variants, purgeQueues(broker, queues))
    yield* purgeQueues(broker, queues)
    const { figures, ratios, headline } = compare("relay", variants, results, [
      {
        variant: "ceiling",
        name: "relay: kit / raw streaming confirms",
        meaning: "share of the ceiling the kit reaches",
        short: "relay kit/ceiling"
      },
      {
        variant: "floor",
        name: "relay: kit / raw publish-and-wait",
        meaning: "times faster than the floor",
        short: "relay kit/floor"
      },
      {
        variant: "rascal",
        name: "relay: kit / rascal",
        meaning: "above 1: the kit is faster",
        short: "relay kit/rascal"
      }
    ])
    return {
      suite: "relay",
      ratios,
      figures,
      notes: [
        `Each round drains ${rows.length} rows (the floor sends ${floorPublishes.length}, rascal ${rascalPublishes.length}: its pool keeps at most 5 publishes unconfirmed); handler queues are purged before every variant.`,
        "The kit's clock starts at its `relay holds the lease` log line and stops when a read-only connection finds no pending row (polled every 5 ms); the baselines time their own publishing from an open channel to the last confirm. CPU per message is this process's (the broker's is not counted) over the same window."
      ],
      headline
    } satisfies SuiteResult
  })
