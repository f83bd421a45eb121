// `npm run lint`: ESLint with typescript-eslint's recommended rules and the Effect
// ecosystem's formatting (@effect/eslint-plugin's dprint rule, with the settings the
// Effect repositories use), then the hexagon's dependency rules (.dependency-cruiser.cjs).
import * as effectEslint from "@effect/eslint-plugin"
import eslint from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["node_modules/**", "bench/results/**", "dist/**"] },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: { module: "writable", require: "readonly" } }
  },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  ...effectEslint.configs.dprint,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly" } },
    rules: {
      // Effect's tagged enums and classes declare a case without fields as `{}`, and a
      // record's type is named as `interface X extends Schema.Schema.Type<typeof X> {}`.
      "@typescript-eslint/no-empty-object-type": ["error", {
        allowObjectTypes: "always",
        allowInterfaces: "with-single-extends"
      }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }]
    }
  }
)
