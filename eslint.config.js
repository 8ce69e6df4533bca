// ESLint for the TypeScript: typescript-eslint's type-aware rules, and @stylistic's rules set to
// the style the code is written in (double quotes, semicolons, 2-space indent, long lines) so the
// format check holds the code to its own style instead of re-laying it out. `npm run lint`.
import js from "@eslint/js";
import stylistic from "@stylistic/eslint-plugin";
import tseslint from "typescript-eslint";

// Every TypeScript file is linted; no folder is left out. What is ignored is not TypeScript: the
// build output, and the JavaScript, which is guest code run in the sandbox (env bundles, the
// sandbox's prelude, the UI's page scripts) or a few small dev and verify launchers (*.mjs),
// checked by running them (`envscaler check`, the parity and UI tests) rather than by these rules.
export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "scratch/**", "**/*.js", "**/*.mjs", "**/*.d.mts"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { project: ["./tsconfig.check.json"], tsconfigRootDir: import.meta.dirname } },
    plugins: { "@stylistic": stylistic },
    rules: {
      // a leading _ marks a value left out on purpose (a destructured field dropped from a copy)
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", ignoreRestSiblings: true }],
      "@stylistic/quotes": ["error", "double", { avoidEscape: true, allowTemplateLiterals: "always" }],
      "@stylistic/semi": ["error", "always"],
      "@stylistic/indent": ["error", 2, { SwitchCase: 1, flatTernaryExpressions: true, ignoredNodes: ["ConditionalExpression *"] }],
      "@stylistic/comma-dangle": ["error", "always-multiline"],
      "@stylistic/eol-last": "error",
      "@stylistic/no-trailing-spaces": "error",
      "@stylistic/no-tabs": "error",
      "@stylistic/linebreak-style": ["error", "unix"],
      "@stylistic/no-multiple-empty-lines": ["error", { max: 1, maxBOF: 0, maxEOF: 0 }],
      "@stylistic/brace-style": ["error", "1tbs", { allowSingleLine: true }],
      "@stylistic/object-curly-spacing": ["error", "always"],
      "@stylistic/array-bracket-spacing": ["error", "never"],
      "@stylistic/comma-spacing": "error",
      "@stylistic/semi-spacing": "error",
      "@stylistic/keyword-spacing": "error",
      "@stylistic/space-before-blocks": "error",
      "@stylistic/space-infix-ops": "error",
      "@stylistic/arrow-parens": ["error", "always"],
      "@stylistic/arrow-spacing": "error",
      "@stylistic/key-spacing": "error",
      "@stylistic/member-delimiter-style": "error",
      "@stylistic/type-annotation-spacing": "error",
      "@stylistic/max-len": ["error", { code: 240, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true }],
    },
  },
  {
    // Tests poke into parsed JSON replies (JSON.parse is `any`) and let the expect() say whether
    // the shape was right; typing every reply first would restate the zod schemas they test.
    files: ["tests/**/*.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      // ...and `any` is the honest type of a parsed fixture a test edits before writing it back
      "@typescript-eslint/no-explicit-any": "off",
    },
  },
);
