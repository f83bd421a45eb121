import { AutoCorrect, type CliConfig, HelpDoc, type Usage } from "@effect/cli"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import { Array as Arr, Console, Effect, Either, HashMap, HashSet, Option } from "effect"
import { UsageError } from "./DeadLetterCommands.js"

/** What of a command this module reads: its descriptor (names, options, subcommands). */
interface CommandOf {
  readonly descriptor: Descriptor.Command<unknown>
}

/**
 * What the kit adds to @effect/cli at the command line: `--log-level` taken out before
 * the CLI sees it, every error as one line that says what to do, help pages without
 * @effect/cli's filler, and colour on a terminal only.
 */

/** The log levels `--log-level` and `DOSTAVKA_LOG_LEVEL` take. */
const logLevels = ["debug", "info", "warning", "error"] as const

/**
 * The command line with `--log-level LEVEL` (or `--log-level=LEVEL`, anywhere before `--`)
 * taken out: it stands for `DOSTAVKA_LOG_LEVEL`, and wins over it. @effect/cli's own
 * `--log-level` sets a minimum level that the kit's logger (`LoggingLive`) replaces, so it
 * would do nothing; the CLI never sees this one.
 */
export const takeLogLevel = (
  args: ReadonlyArray<string>
): Either.Either<{ readonly args: ReadonlyArray<string>; readonly level: Option.Option<string> }, UsageError> => {
  const end = args.includes("--") ? args.indexOf("--") : args.length
  const rest: Array<string> = []
  let level = Option.none<string>()
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const value = i >= end
      ? undefined
      : arg === "--log-level"
      ? (args[++i] ?? "")
      : arg.startsWith("--log-level=")
      ? arg.slice("--log-level=".length)
      : undefined
    if (value === undefined) {
      rest.push(arg)
    } else if ((logLevels as ReadonlyArray<string>).includes(value)) {
      level = Option.some(value)
    } else {
      return Either.left(
        new UsageError({
          detail: value === ""
            ? "--log-level needs a value: use debug, info, warning or error"
            : `--log-level ${JSON.stringify(value)} is not accepted: use debug, info, warning or error`
        })
      )
    }
  }
  return Either.right({ args: rest, level })
}

/** One level of the command tree as an error message needs it: its words, its options, its subcommands. */
interface CommandLevel {
  readonly path: string
  readonly options: ReadonlyArray<Usage.Named>
  readonly children: ReadonlyMap<string, CommandLevel>
}

/** Every named element of a usage: a command's name first, then its options with the values they take. */
const namedOf = (usage: Usage.Usage): ReadonlyArray<Usage.Named> =>
  usage._tag === "Named"
    ? [usage]
    : usage._tag === "Optional" || usage._tag === "Repeated"
    ? namedOf(usage.usage)
    : usage._tag === "Concat" || usage._tag === "Alternation"
    ? [...namedOf(usage.left), ...namedOf(usage.right)]
    : []

const levelOf = (
  path: string,
  descriptor: Descriptor.Command<unknown>,
  children: ReadonlyMap<string, CommandLevel> = new Map()
): CommandLevel => ({ path, options: namedOf(Descriptor.getUsage(descriptor)).slice(1), children })

/** `top` (`dostavka`), its `commands` and their subcommands (two levels, as the CLI has them). */
const commandTreeOf = (
  top: CommandOf,
  commands: ReadonlyArray<CommandOf>
): CommandLevel =>
  levelOf(
    "dostavka",
    top.descriptor,
    new Map(commands.map((command) => {
      const descriptor = command.descriptor
      const name = Arr.fromIterable(HashSet.values(Descriptor.getNames(descriptor)))[0]!
      const path = `dostavka ${name}`
      const subcommands = Arr.fromIterable(HashMap.entries(Descriptor.getSubcommands(descriptor)))
        .filter(([sub]) => sub !== name)
      return [
        name,
        levelOf(path, descriptor, new Map(subcommands.map(([sub, d]) => [sub, levelOf(`${path} ${sub}`, d)])))
      ] as const
    }))
  )

/** The options every command takes (@effect/cli's built-ins), and whether they take a value. */
const builtIns: ReadonlyMap<string, boolean> = new Map([["--version", false], ["--wizard", false], [
  "--completions",
  true
]])

const choicesOf = (option: Usage.Named) =>
  Option.filter(option.acceptedValues, (values) => values.includes(" | ")).pipe(Option.map((v) => v.split(" | ")))

/** `a`, `a or b`, `a, b or c`. */
const either = (words: ReadonlyArray<string>) =>
  words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`

const closest = (word: string, candidates: ReadonlyArray<string>, cliConfig: CliConfig.CliConfig) =>
  Arr.head(
    candidates
      .map((candidate) => [candidate, AutoCorrect.levensteinDistance(word, candidate, cliConfig)] as const)
      .filter(([, distance]) => distance <= cliConfig.autoCorrectLimit)
      .sort((a, b) => a[1] - b[1])
      .map(([candidate]) => candidate)
  )

/**
 * Walks `args` down the command tree and says what is wrong at the level it stops at:
 * an unknown option or command (with the nearest name), an option without its value, a
 * value a choice does not take, or a word no command expects. `None` when it sees
 * nothing wrong; the level reached either way, for the hint.
 */
const locate = (
  commandTree: CommandLevel,
  cliConfig: CliConfig.CliConfig,
  args: ReadonlyArray<string>
): { readonly level: CommandLevel; readonly problem: Option.Option<string> } => {
  let level = commandTree
  const found = (problem: string) => ({ level, problem: Option.some(problem) })
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") break
    if (arg.startsWith("-")) {
      const [flag, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [
        arg,
        undefined
      ]
      const option = level.options.find((o) => o.names.includes(flag!))
      const builtIn = builtIns.get(flag!)
      if (option === undefined && builtIn === undefined) {
        const names = level.options.flatMap((o) => o.names)
        return found(
          `unknown option ${flag} for ${level.path}${
            Option.match(closest(flag!, names, cliConfig), {
              onNone: () => "",
              onSome: (name) => ` (did you mean ${name}?)`
            })
          }; ${level.path} --help lists its options`
        )
      }
      const takesValue = option !== undefined ? Option.isSome(option.acceptedValues) : builtIn!
      if (!takesValue || option === undefined) {
        if (takesValue && inline === undefined) i++
        continue
      }
      const value = inline ?? args[i + 1]
      if (inline === undefined) i++
      const choices = choicesOf(option)
      if (value === undefined || (inline === undefined && value.startsWith("--"))) {
        return found(
          Option.match(choices, {
            onNone: () => `${flag} needs a value (${Option.getOrElse(option.acceptedValues, () => "")})`,
            onSome: (values) => `${flag} needs a value: use ${either(values)}`
          })
        )
      }
      if (Option.isSome(choices) && !choices.value.includes(value)) {
        return found(
          flag === "--role"
            ? `--role ${JSON.stringify(value)} is not a role: use ${choices.value.join(", ")}`
            : `${flag} ${JSON.stringify(value)} is not accepted: use ${either(choices.value)}`
        )
      }
      continue
    }
    const child = level.children.get(arg)
    if (child !== undefined) {
      level = child
      continue
    }
    const commands = [...level.children.keys()].sort()
    return found(
      commands.length > 0
        ? `unknown command ${JSON.stringify(arg)} for ${level.path}${
          Option.match(closest(arg, commands, cliConfig), {
            onNone: () => "",
            onSome: (name) => ` (did you mean ${name}?)`
          })
        }: use ${either(commands)}`
        : `unexpected argument ${JSON.stringify(arg)} for ${level.path}; ${level.path} --help lists its options`
    )
  }
  return { level, problem: Option.none() }
}

// Select Graphic Rendition: the colours and weights @effect/cli's help pages are printed in.
// eslint-disable-next-line no-control-regex -- the escape is what is matched
const sgr = /\u001b\[[0-9;]*m/g
const withoutColour = (text: string) => text.replace(sgr, "")

/** @effect/cli's filler on every option of its kind ("A true or false value."): the option's own description follows. */
const filler = /^ {2}(A user-defined piece of text\.|A true or false value\.)\n\n/gm

/** Colour on a terminal only, and never with `NO_COLOR` set to anything but "" (no-color.org). */
const colourFor = (stream: NodeJS.WriteStream) => stream.isTTY === true && (process.env.NO_COLOR ?? "") === ""

/**
 * The console the CLI prints through: without colour where `colourFor` says so, and, on
 * a help page, without @effect/cli's filler lines. What the kit itself prints carries no
 * colour, and what came off the bus was escaped before (`printable`), so nothing else is
 * changed; logs go through the logger, unchanged.
 */
export const terminalConsole = (help: boolean) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.consoleWith((base) => {
    const clean = (colour: boolean) => (arg: unknown) => {
      if (typeof arg !== "string") return arg
      const text = help ? `${arg}\n`.replace(filler, "").slice(0, -1) : arg
      return colour ? text : withoutColour(text)
    }
    const log = clean(colourFor(process.stdout))
    const error = clean(colourFor(process.stderr))
    return Console.withConsole(effect, {
      ...base,
      log: (...args: ReadonlyArray<unknown>) => base.log(...args.map(log)),
      error: (...args: ReadonlyArray<unknown>) => base.error(...args.map(error))
    })
  })

/** @effect/cli's message as plain text, on one line. */
const plainText = (doc: HelpDoc.HelpDoc) => withoutColour(HelpDoc.toAnsiText(doc)).trim().replace(/\s*\n\s*/g, " ")

/**
 * The command line of `root` (`top` with its `commands`) checked before anything runs: an
 * error is one `dostavka:` line with what to do (`UsageError`, exit 2) instead of
 * @effect/cli's own message ("Invalid subcommand for dostavka" for `--role` without a
 * value or `--rol`), and whether a help page is asked for.
 */
export const commandLineOf = (
  root: CommandOf,
  top: CommandOf,
  commands: ReadonlyArray<CommandOf>,
  cliConfig: CliConfig.CliConfig
) => {
  const commandTree = commandTreeOf(top, commands)
  /**
   * The command line checked before anything runs, with every error as one line that
   * starts with `dostavka:` and says what to do (`UsageError`, exit 2). @effect/cli would
   * print its own message first (for `--role` without a value or `--rol`: "Invalid
   * subcommand for dostavka"), so the line is parsed here without printing, and the CLI
   * runs only a line that parsed. Help asked for is left to the CLI.
   */
  const check = (args: ReadonlyArray<string>) =>
    Descriptor.parse(root.descriptor, ["dostavka", ...args], cliConfig).pipe(
      Effect.either,
      Effect.flatMap((parsed) => {
        const { level, problem } = locate(commandTree, cliConfig, args)
        if (Either.isRight(parsed) && (parsed.right._tag === "BuiltIn" || parsed.right.leftover.length === 0)) {
          return Effect.void
        }
        const required = Either.isLeft(parsed)
          ? /^Expected to find option: '(.+)'$/.exec(plainText(parsed.left.error))
          : null
        const detail = Option.getOrElse(problem, () =>
          required !== null
            ? `${level.path} needs ${required[1]}; ${level.path} --help lists its options`
            : `${level.path}: ${
              Either.isLeft(parsed) ? plainText(parsed.left.error) : "unexpected arguments"
            }; ${level.path} --help lists its options`)
        return Effect.fail(new UsageError({ detail }))
      })
    )

  /** Whether the command line asks for a help page: `-h` or `--help`, or a command group alone (`dostavka dead`). */
  const asksForHelp = (args: ReadonlyArray<string>) => {
    const end = args.includes("--") ? args.indexOf("--") : args.length
    if (args.slice(0, end).some((arg) => arg === "--help" || arg === "-h")) return true
    const { level, problem } = locate(commandTree, cliConfig, args)
    return Option.isNone(problem) && level.children.size > 0 && level !== commandTree
  }

  return { check, asksForHelp }
}
