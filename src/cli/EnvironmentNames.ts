import { AutoCorrect, CliConfig } from "@effect/cli"
import { type Config, ConfigError, ConfigProvider, ConfigProviderPathPatch, Effect, HashSet, Option } from "effect"

/**
 * The `DOSTAVKA_*` variables read outside `Config`, each where it is read. They configure
 * the tools, not the kit, and are known so that setting one draws no warning.
 */
export const ToolVariables = [
  // scripts/broker.sh, scripts/rabbit-node.sh: seconds to wait for a broker being started.
  "DOSTAVKA_BROKER_WAIT_S",
  // scripts/rabbit-node.sh: the folder of rabbitmq-server and rabbitmqctl.
  "DOSTAVKA_RABBITMQ_BIN",
  // test/support/roles.ts (tests only): 1 shows every log line of the roles a test runs.
  "DOSTAVKA_TEST_LOGS",
  // test/support/properties.ts (tests only): cases per property, and a seed to replay.
  "DOSTAVKA_PROPERTY_RUNS",
  "DOSTAVKA_PROPERTY_SEED"
] as const

/**
 * The names of the environment variables `configs` read, sorted. Each config is read once
 * from a provider that holds nothing and records every name it is asked for: a default
 * or `Config.option` takes over, so every name is asked for, per-handler ones included,
 * and a setting added to `settingsConfig` is known without being listed again. (A setting
 * with neither would end the reading at its name; test/configNames.test.ts checks the
 * result against every name the sources mention.)
 */
export const variablesReadBy = (configs: ReadonlyArray<Config.Config<unknown>>): ReadonlyArray<string> => {
  const names = new Set<string>()
  const recorder = ConfigProvider.fromFlat(ConfigProvider.makeFlat({
    load: (path) => {
      names.add(path.join("_"))
      return Effect.fail(ConfigError.MissingData([...path], "not set"))
    },
    enumerateChildren: () => Effect.succeed(HashSet.empty()),
    patch: ConfigProviderPathPatch.empty
  }))
  for (const config of configs) Effect.runSync(Effect.ignore(Effect.withConfigProvider(config, recorder)))
  return [...names].sort()
}

/** A `DOSTAVKA_*` variable of the environment that nothing reads, and the known name it is closest to, if one is close. */
export interface UnknownVariable {
  readonly name: string
  readonly closest: Option.Option<string>
}

const caseBlind = CliConfig.make({ isCaseSensitive: false })

/**
 * The names in `env` that start with `DOSTAVKA_` (in any case) and are not in `known`, in
 * order, each with the closest known name when it is close: within 3 edits (Levenshtein,
 * letter case aside; @effect/cli's `AutoCorrect`), and within a third of the letters after
 * the prefix, so that `DOSTAVKA_CATALOG_MAX_ATTEMPS` finds `DOSTAVKA_CATALOG_MAX_ATTEMPTS`
 * and `DOSTAVKA_FOO` finds nothing. A misspelt name is otherwise ignored in silence: its
 * setting keeps its default.
 */
export const unknownVariables = (
  env: Readonly<Record<string, string | undefined>>,
  known: ReadonlyArray<string>
): ReadonlyArray<UnknownVariable> =>
  Object.keys(env)
    .filter((name) => /^DOSTAVKA_/i.test(name) && !known.includes(name))
    .sort()
    .map((name) => {
      const limit = Math.min(3, Math.max(1, Math.floor((name.length - "DOSTAVKA_".length) / 3)))
      const [closest] = known
        .map((candidate) => [candidate, AutoCorrect.levensteinDistance(name, candidate, caseBlind)] as const)
        .filter(([, distance]) => distance <= limit)
        .sort((a, b) => a[1] - b[1])
      return { name, closest: Option.fromNullable(closest?.[0]) }
    })

/** `unknown` as the line a process logs at start, e.g. `… is not a setting, and is ignored; did you mean …?`. */
export const describeUnknownVariable = (unknown: UnknownVariable): string =>
  `${unknown.name} is not a setting, and is ignored${
    Option.match(unknown.closest, { onNone: () => "", onSome: (name) => `; did you mean ${name}?` })
  }`
